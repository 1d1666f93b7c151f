// Package manifest is the binary wire format of the OwnerMap (SPEC §7; seed
// 001 §2): the bytes the planner's OwnerMapPublisher pushes to every node
// (messages.OwnerMapPush carries them, chunked) and that the nodes and the
// routers install.
//
// The package is pure: no goroutines, clocks or I/O. It encodes and decodes
// byte slices and never panics on any input.
//
// # Layout
//
// Every integer is little-endian. Every manifest starts with the same 16-byte
// header:
//
//	offset size field
//	0      4    magic "AURA"
//	4      2    manifest_version (1, 2, or 3 for a delta)
//	6      8    epoch
//	14     2    reserved, zero
//
// Version 1 (the fallback table only):
//
//	16     4    num_warehouses W
//	20     W    owner byte per warehouse (control.OwnerMap.Fallback; 0xFF = unowned)
//
// Version 2 is version 1's two sections followed by the cohort section:
//
//	4          num_cohorts C
//	per cohort, in ascending cohort_id order:
//	  8        cohort_id
//	  1        owner_cn (a node index below control.MaxNodes)
//	  2        num_kgs K (at most 65535)
//	  8×K      key group ids, strictly ascending
//
// Version 3 is a delta: the changes that turn the OwnerMap at base_epoch into
// the one at epoch, for steady state, where a tick moves a few cohorts out of
// hundreds or thousands (seed 001 §3.3: "增量 publish 只动变化的 cohort"):
//
//	16     8    base_epoch (the epoch the delta applies to; below epoch)
//	24     4    num_warehouses W (the new fallback table's length)
//	28     4    num_fallback_changes F
//	per change, in strictly ascending index order:
//	  4        index (below W)
//	  1        owner byte
//	4          num_upserts U
//	per upsert (a cohort added, or whose key groups changed), ascending cohort_id:
//	  8 + 1 + 2 + 8×K   as a version 2 cohort
//	4          num_moves M
//	per move (a cohort of the base whose owner alone changed), ascending cohort_id:
//	  8        cohort_id
//	  1        owner_cn
//	4          num_removed R
//	per removal (a cohort of the base that is gone), ascending cohort_id:
//	  8        cohort_id
//
// Applying a delta: the fallback table is the base's, cut or extended to W
// entries (new entries unowned, 0xFF), then each change is applied; each
// upsert replaces or adds its cohort; each move sets the owner of a base
// cohort; each removal drops a base cohort. A cohort id appears in at most
// one of the three lists; moves and removals name cohorts of the base. The
// result must be a valid OwnerMap. A migration, the common steady-state
// change, costs 9 bytes.
//
// # Promises
//
//   - Canonical: Encode writes cohorts in ascending id order, so an OwnerMap
//     has exactly one encoding per version, and Decode accepts nothing else
//     (unsorted cohorts, non-zero reserved bytes and trailing bytes are errors).
//     Anything Decode accepts re-encodes to the same bytes (a version 1 reader
//     skipping a version 2 cohort section excepted) and to an equal map.
//   - Cross-version: a version 1 reader (DecodeOptions.MaxVersion = 1) given
//     version 2 reads the fallback section and skips the rest, unchecked; a
//     version 2 reader given version 1 gets the fallback table and no cohorts.
//   - Bounded: the input's size is checked against a cap (DefaultMaxBytes,
//     configurable) before anything is read, and every count is checked
//     against the bytes that remain before anything is allocated, so memory
//     use is linear in the input's size, whatever the input claims.
//   - Typed errors: malformed input is a *FormatError wrapping one of the
//     sentinels (ErrBadMagic, ErrUnsupportedVersion, ErrWrongKind,
//     ErrTruncated, ErrTooLarge, ErrTrailingBytes, ErrInvalid,
//     ErrTooManyKeyGroups, ErrBaseMismatch); match them with errors.Is.
//   - Validated: a decoded or applied map satisfies control.OwnerMap.Validate
//     (owners in range, cohort ids unique, no key group in two cohorts, key
//     groups sorted) and Encode refuses maps that do not.
//   - Inputs are never modified; decoded maps do not alias the input bytes.
package manifest
