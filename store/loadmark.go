package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aura-runtime/aura/rdma"
)

// The load marker is one word in a region of its own that records whether a
// memory node's tables have been loaded, so that a second loader cannot write
// over tables that already hold records (the Loader places records as if the
// tables were empty) and two loaders cannot run at once.
const (
	loadMarkRegion = "aura/load-state"
	loadEmpty      = 0
	loadLoading    = 1
	loadLoaded     = 2
)

// ErrAlreadyLoaded: the memory node's tables were loaded (or are being
// loaded) by someone else; start a fresh memory node to load again.
var ErrAlreadyLoaded = errors.New("store: the memory node's tables are already loaded (or being loaded); restart the memory node for a fresh load")

// ErrNotLoaded: tables are used before any loader finished.
var ErrNotLoaded = errors.New("store: the memory node's tables have not been loaded")

func loadMark(ctx context.Context, dev rdma.Device, op rdma.WorkRequest) (uint64, error) {
	r, err := dev.RegisterRegion(ctx, loadMarkRegion, 8)
	if err != nil {
		return 0, err
	}
	qp, err := dev.CreateQP(rdma.QPConfig{})
	if err != nil {
		return 0, err
	}
	defer qp.Close()
	op.RKey, op.RemoteAddr = r.RKey, r.Addr
	cs, err := rdma.Exec(ctx, qp, op)
	if err == nil {
		err = rdma.FirstError(cs)
	}
	if err != nil {
		return 0, fmt.Errorf("store: load marker: %w", err)
	}
	return cs[0].Value, nil
}

// ClaimLoad marks the memory node's tables as being loaded, or fails with
// ErrAlreadyLoaded if a loader claimed them before.
func ClaimLoad(ctx context.Context, dev rdma.Device) error {
	old, err := loadMark(ctx, dev, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Compare: loadEmpty, Swap: loadLoading})
	if err != nil {
		return err
	}
	if old != loadEmpty {
		return ErrAlreadyLoaded
	}
	return nil
}

// MarkLoaded records that a claimed load finished.
func MarkLoaded(ctx context.Context, dev rdma.Device) error {
	old, err := loadMark(ctx, dev, rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Compare: loadLoading, Swap: loadLoaded})
	if err != nil {
		return err
	}
	if old != loadLoading {
		return fmt.Errorf("store: load marker was %d, not loading", old)
	}
	return nil
}

// CheckLoaded fails with ErrNotLoaded unless a load finished.
func CheckLoaded(ctx context.Context, dev rdma.Device) error {
	v, err := loadMark(ctx, dev, rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Add: 0})
	if err != nil {
		return err
	}
	if v != loadLoaded {
		return ErrNotLoaded
	}
	return nil
}

// LoadOnce loads the tables of layout on the memory node behind dev exactly
// once: it claims the load (ErrAlreadyLoaded if another process did), runs
// fill on a Loader, flushes it and marks the node loaded. It returns the
// records loaded.
func LoadOnce(ctx context.Context, layout *Layout, dev rdma.Device, fill func(context.Context, *Loader) error) (uint64, error) {
	if err := ClaimLoad(ctx, dev); err != nil {
		return 0, err
	}
	loader, err := NewLoader(layout, dev)
	if err != nil {
		return 0, err
	}
	err = fill(ctx, loader)
	if cerr := loader.Close(ctx); err == nil {
		err = cerr
	}
	if err == nil {
		err = MarkLoaded(ctx, dev)
	}
	return loader.Loaded(), err
}
