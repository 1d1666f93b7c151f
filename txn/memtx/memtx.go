// Package memtx is a reference implementation of txn.Tx: an in-memory store
// that runs one transaction at a time under a mutex, so its histories are
// serial by construction. Workload tests run their programs and consistency
// checks on it to tell workload bugs from engine bugs.
package memtx

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aura-runtime/aura/txn"
)

// Store is a serial, in-memory transactional store.
type Store struct {
	mu     sync.Mutex
	schema txn.Schema
	rows   map[txn.Ref][]byte
}

// New returns an empty store for a valid schema.
func New(schema txn.Schema) (*Store, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	return &Store{schema: schema, rows: make(map[txn.Ref][]byte)}, nil
}

// Run executes prog as one transaction. Its writes become visible only if it
// returns nil; a program error (including txn.ErrRollback) discards them and
// is returned.
func (s *Store) Run(prog txn.Program) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &memTx{s: s, writes: map[txn.Ref][]byte{}, locked: map[txn.Ref]bool{}}
	if err := prog(tx); err != nil {
		return err
	}
	for r, v := range tx.writes {
		if v == nil {
			delete(s.rows, r)
		} else {
			s.rows[r] = v
		}
	}
	return nil
}

// Load stores a record outside any transaction (initial population).
func (s *Store) Load(r txn.Ref, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkValue(r, value); err != nil {
		return err
	}
	s.rows[r] = append([]byte(nil), value...)
	return nil
}

// Insert stores a record outside any transaction (workload.Inserter).
func (s *Store) Insert(_ context.Context, r txn.Ref, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkValue(r, value); err != nil {
		return err
	}
	if _, ok := s.rows[r]; ok {
		return fmt.Errorf("%w: %v", txn.ErrExists, r)
	}
	s.rows[r] = append([]byte(nil), value...)
	return nil
}

// Get reads a committed record outside any transaction (workload.Reader).
func (s *Store) Get(_ context.Context, r txn.Ref) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.rows[r]
	if !ok {
		return nil, false, nil
	}
	return append([]byte(nil), v...), true, nil
}

// Len returns the number of records in a table.
func (s *Store) Len(t txn.TableID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for r := range s.rows {
		if r.Table == t {
			n++
		}
	}
	return n
}

func (s *Store) checkValue(r txn.Ref, value []byte) error {
	t, ok := s.schema.Table(r.Table)
	if !ok {
		return fmt.Errorf("%w: %d", txn.ErrNoSuchTable, r.Table)
	}
	if len(value) != t.ValueSize {
		return fmt.Errorf("%w: table %s wants %d bytes, got %d", txn.ErrValueSize, t.Name, t.ValueSize, len(value))
	}
	return nil
}

type memTx struct {
	s      *Store
	writes map[txn.Ref][]byte // nil value = deleted
	locked map[txn.Ref]bool
}

func (t *memTx) lookup(r txn.Ref) ([]byte, bool) {
	if v, ok := t.writes[r]; ok {
		return v, v != nil
	}
	v, ok := t.s.rows[r]
	return v, ok
}

func (t *memTx) Get(r txn.Ref) ([]byte, error) {
	if _, ok := t.s.schema.Table(r.Table); !ok {
		return nil, fmt.Errorf("%w: %d", txn.ErrNoSuchTable, r.Table)
	}
	v, ok := t.lookup(r)
	if !ok {
		return nil, fmt.Errorf("%w: %v", txn.ErrNotFound, r)
	}
	return append([]byte(nil), v...), nil
}

func (t *memTx) GetMany(rs []txn.Ref) ([][]byte, error) {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		v, err := t.Get(r)
		if err != nil && !errors.Is(err, txn.ErrNotFound) {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (t *memTx) GetForUpdate(r txn.Ref) ([]byte, error) {
	v, err := t.Get(r)
	if err == nil {
		t.locked[r] = true
	}
	return v, err
}

func (t *memTx) GetForUpdateMany(rs []txn.Ref) ([][]byte, error) {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		v, err := t.GetForUpdate(r)
		if err != nil && !errors.Is(err, txn.ErrNotFound) {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (t *memTx) Put(r txn.Ref, value []byte) error {
	if err := t.s.checkValue(r, value); err != nil {
		return err
	}
	if !t.locked[r] {
		return fmt.Errorf("%w: %v", txn.ErrNotLocked, r)
	}
	t.writes[r] = append([]byte(nil), value...)
	return nil
}

func (t *memTx) Insert(r txn.Ref, value []byte) error {
	if err := t.s.checkValue(r, value); err != nil {
		return err
	}
	if _, ok := t.lookup(r); ok {
		return fmt.Errorf("%w: %v", txn.ErrExists, r)
	}
	t.locked[r] = true
	t.writes[r] = append([]byte(nil), value...)
	return nil
}

func (t *memTx) Delete(r txn.Ref) error {
	if !t.locked[r] {
		return fmt.Errorf("%w: %v", txn.ErrNotLocked, r)
	}
	if _, ok := t.lookup(r); !ok {
		return fmt.Errorf("%w: %v", txn.ErrNotFound, r)
	}
	t.writes[r] = nil
	return nil
}
