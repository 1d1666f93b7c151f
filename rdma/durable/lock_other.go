//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package durable

import (
	"errors"
	"fmt"
	"os"
)

// lockFileName is the file a memory node holds an exclusive lock on while
// it owns the directory.
const lockFileName = "LOCK"

// ErrLocked: another process (or another Open in this one) holds the data
// directory.
var ErrLocked = errors.New("durable: data directory is in use by another memory node")

// lockDir refuses: without flock two memory nodes could share a directory
// and corrupt each other's log.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("durable: locking %s: no flock on this platform", dir)
}
