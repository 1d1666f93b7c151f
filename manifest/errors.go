package manifest

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by *FormatError. Match them with errors.Is.
var (
	// ErrBadMagic: the input does not start with "AURA".
	ErrBadMagic = errors.New("bad magic")
	// ErrUnsupportedVersion: the manifest_version is none this package knows.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrWrongKind: a delta given to Decode, or a full manifest given to
	// ApplyDelta.
	ErrWrongKind = errors.New("wrong manifest kind")
	// ErrTruncated: the input ends before a field or before the bytes a count
	// announces.
	ErrTruncated = errors.New("truncated")
	// ErrTooLarge: the input, or an encoding, exceeds the size cap.
	ErrTooLarge = errors.New("too large")
	// ErrTrailingBytes: bytes follow the last section.
	ErrTrailingBytes = errors.New("trailing bytes")
	// ErrInvalid: well-formed bytes describing an invalid OwnerMap or delta (a
	// key group in two cohorts, an owner out of range, unsorted key groups or
	// cohorts, a non-zero reserved field, a delta naming a cohort its base
	// lacks, an epoch that does not grow), or an invalid map given to Encode.
	ErrInvalid = errors.New("invalid")
	// ErrTooManyKeyGroups: a cohort has more key groups than num_kgs can
	// count (MaxCohortKeyGroups).
	ErrTooManyKeyGroups = errors.New("too many key groups in a cohort")
	// ErrBaseMismatch: a delta applied to a base other than the one at its
	// base_epoch. The receiver needs a full manifest (OwnerMapAck.need_full).
	ErrBaseMismatch = errors.New("base epoch mismatch")
)

// FormatError reports a manifest that cannot be encoded, decoded or applied.
type FormatError struct {
	// Op is "encode", "decode", "encode delta" or "apply delta".
	Op string
	// Offset is the byte offset in the input where the problem was found, or
	// -1 when the problem is not at a position (encoding, a size cap, the
	// resulting map as a whole).
	Offset int
	// Err is one of the package's sentinels.
	Err error
	// Detail says what exactly is wrong.
	Detail string
}

func (e *FormatError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("manifest: %s: at offset %d: %v: %s", e.Op, e.Offset, e.Err, e.Detail)
	}
	return fmt.Sprintf("manifest: %s: %v: %s", e.Op, e.Err, e.Detail)
}

// Unwrap returns the sentinel.
func (e *FormatError) Unwrap() error { return e.Err }

func errorf(op string, off int, sentinel error, format string, args ...any) *FormatError {
	return &FormatError{Op: op, Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
