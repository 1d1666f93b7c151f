package main

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// byteUnits maps size suffixes (matched case-insensitively) to multipliers:
// IEC binary units (KiB = 1024), SI decimal units (KB = 1000), and the bare
// letters K, M, G, T, P, which — as in dd, ulimit and most memory flags —
// mean binary units.
var byteUnits = map[string]uint64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// parseBytes parses a byte count such as "4096", "512MiB", "4GiB", "1.5G" or
// "100MB". A fraction is allowed before a unit; the result must be a whole
// number of bytes that fits in a uint64.
func parseBytes(s string) (uint64, error) {
	in := strings.TrimSpace(s)
	i := 0
	for i < len(in) && (in[i] >= '0' && in[i] <= '9' || in[i] == '.' || in[i] == '_') {
		i++
	}
	num := strings.ReplaceAll(in[:i], "_", "")
	unit := strings.ToLower(strings.TrimSpace(in[i:]))
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB)", s, in[i:])
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetUint64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	n := r.Num()
	if !n.IsUint64() {
		return 0, fmt.Errorf("invalid size %q: larger than %d bytes", s, uint64(math.MaxUint64))
	}
	return n.Uint64(), nil
}

// formatBytes renders n with the largest binary unit that divides it.
func formatBytes(n uint64) string {
	for _, u := range []struct {
		name string
		size uint64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// byteSize is a pflag.Value for sizes with units.
type byteSize uint64

func (b *byteSize) String() string { return formatBytes(uint64(*b)) }
func (b *byteSize) Type() string   { return "bytes" }
func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}
