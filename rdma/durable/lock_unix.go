//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFileName is the file a memory node holds an exclusive flock on while
// it owns the directory.
const lockFileName = "LOCK"

// ErrLocked: another process (or another Open in this one) holds the data
// directory.
var ErrLocked = errors.New("durable: data directory is in use by another memory node")

// lockDir takes an exclusive, non-blocking flock on dir/LOCK. The kernel
// drops it when the process dies, kill -9 included, so a crash never
// leaves a stale lock behind (unlike a PID file).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("durable: opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("durable: locking %s: %w", dir, err)
	}
	return f, nil
}
