// Package zipf holds the skewed key generators of the workloads: YCSB's
// Zipfian generator (Gray et al., "Quickly Generating Billion-Record
// Synthetic Databases", SIGMOD 1994, as implemented by YCSB's
// ZipfianGenerator) and YCSB's scrambled variant (ScrambledZipfianGenerator),
// which draws from a Zipfian over 10^10 items and hashes the result (FNV-1a
// 64) into the requested range so that the popular items are scattered over
// the key space instead of clustered at its start.
//
// Generators are immutable once built and safe for concurrent use; every
// draw takes the caller's random source (a *math/rand/v2.Rand, typically a
// PCG seeded per client), so sequences are deterministic for a given source.
//
// Zeta(n, θ) = Σ_{i=1..n} i^-θ is summed exactly (in YCSB's order) up to
// ExactZetaLimit items; beyond that the tail is computed with the
// Euler–Maclaurin formula, which agrees with the exact sum to about 1e-12
// relative, so a 10^10-item zeta costs microseconds instead of minutes.
package zipf
