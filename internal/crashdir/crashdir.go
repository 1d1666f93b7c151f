// Package crashdir copies a data directory the way kill -9 leaves it, for
// the durability tests of the memory node: what was written to the files
// (whether or not it was fsynced) is in the copy, and nothing the process
// still held in memory.
package crashdir

import (
	"os"
	"path/filepath"
	"testing"
)

// Copy copies dir's files, as they are on disk now, into a new temporary
// directory of the test and returns its path.
func Copy(tb testing.TB, dir string) string {
	tb.Helper()
	dst := tb.TempDir()
	es, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dst
}
