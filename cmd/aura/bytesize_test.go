package main

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	good := map[string]uint64{
		"0": 0, "4096": 4096, "4096B": 4096, "1b": 1,
		"512MiB": 512 << 20, "4GiB": 4 << 30, "64mib": 64 << 20, "1KiB": 1024, "2TiB": 2 << 40, "1PiB": 1 << 50,
		"1K": 1024, "3M": 3 << 20, "1G": 1 << 30, "1Gi": 1 << 30,
		"1KB": 1000, "100MB": 100e6, "2GB": 2e9, "1TB": 1e12,
		"1.5GiB": 3 << 29, "0.5KiB": 512, " 8 MiB ": 8 << 20, "1_000": 1000,
		"16383PiB": 16383 << 50, "18446744073709551615": 1<<64 - 1,
	}
	for in, want := range good {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := []string{"", "MiB", "-1", "1.2.3", "12XB", "1.3B", "0.1KiB", "16384PiB", "99999999999999999999", "1e9", ".", "1 2"}
	for _, in := range bad {
		if n, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, n)
		} else if !strings.Contains(err.Error(), "invalid size") {
			t.Errorf("parseBytes(%q): unhelpful error %v", in, err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1: "1B", 1023: "1023B", 1024: "1KiB", 1536: "1536B", 64 << 20: "64MiB", 1 << 30: "1GiB", 3 << 40: "3TiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
		if back, err := parseBytes(formatBytes(n)); err != nil || back != n {
			t.Errorf("round trip %d: %d %v", n, back, err)
		}
	}
}
