// Package report turns the runs of one `aura bench` or `aura sim`
// invocation ([]bench.Result, with the command line and the machine they
// ran on) into a self-contained report directory.
//
// What it promises:
//
//   - The directory holds index.html, the runs as runs.json ({"runs":[…]},
//     the same schema as --json) and PNG plots named plot-*.png, all beside
//     each other. index.html references nothing else: no script, no style
//     sheet, no font or image from the network, so it opens offline (its
//     style is inline).
//   - index.html shows the exact command, the machine, a headline table (one
//     row per run: committed, throughput, p50/p99 latency, atomics/txn,
//     owner RPCs/txn, LOCAL hit, remote lock ops/txn, abort rate,
//     migrations, cohorts) with ratios against mn-only (and, for remote lock
//     ops, against oracle) when those modes ran, and every run's parameters.
//   - Plots, drawn with gonum/plot, one line per run on shared axes over the
//     timeline: throughput, atomics/txn, LOCAL hit, remote lock ops/txn,
//     cohort count and migrations; when the samples carry per-CN load
//     (bench.Sample.CNTPS) the load imbalance (busiest CN over the mean) of
//     every run and each run's per-CN throughput; for every run whose
//     samples carry OwnerMap samples (bench.Sample.Owners: aura) a heat map
//     of key group → owner over time.
//   - Every size is bounded: at most MaxRuns runs, MaxPoints points per
//     line (longer timelines are thinned evenly), MaxHeatColumns ×
//     bench.MaxOwnerKeyGroups heat-map cells, fixed image dimensions.
//   - The same input gives byte-identical files (nothing depends on the
//     clock or on map iteration order).
//
// Directory rule (Write, CheckDir): the directory may be missing (it is
// created), empty, or hold an earlier report (an index.html this package
// wrote). In the last case only the files a report owns — index.html,
// runs.json and plot-*.png — are replaced or removed; other files stay.
// Any other non-empty directory, or a path that is not a directory, is
// refused, so a report never overwrites unrelated files.
package report
