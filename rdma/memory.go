package rdma

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Memory is the memory of one memory node: registered regions and the
// execution of verbs on them. Both the in-process backend and the TCP
// memory-node server run verbs through it, so their semantics cannot differ.
//
// Memory is held as 8-byte words accessed only with atomic loads, stores and
// compare-and-swaps. READ and WRITE are therefore atomic per aligned 8-byte
// word but not across words — the guarantee PCIe and RDMA NICs give — and a
// READ that races a WRITE may see a torn multi-word value. Callers above
// (the OCC engine) detect torn records with versions, as FORD does.
type Memory struct {
	mu       sync.RWMutex // guards the region tables; verbs take it shared
	byKey    map[uint32]*region
	byName   map[string]*region
	capacity uint64 // bytes that may be registered in total
	used     uint64
	nextAddr uint64
}

type region struct {
	Region
	words []uint64 // len = ceil(Length/8); accessed atomically only
}

// regionAlign aligns region addresses, like page-aligned registered buffers.
const regionAlign = 4096

// firstRegionAddr keeps address 0 (and the first page) unused, so a zero
// address is never valid, as a NULL remote pointer is not.
const firstRegionAddr = 1 << 20

// NewMemory returns an empty memory node that can register up to capacity bytes.
func NewMemory(capacity uint64) *Memory {
	return &Memory{
		byKey:    make(map[uint32]*region),
		byName:   make(map[string]*region),
		capacity: capacity,
		nextAddr: firstRegionAddr,
	}
}

// Capacity returns the bytes that may be registered in total.
func (m *Memory) Capacity() uint64 { return m.capacity }

// maxRegionLength caps one region (1 TiB) whatever the capacity, so that an
// absurd length from a client (up to 2^64-1 over the TCP protocol) is refused
// with ErrOutOfMemory instead of panicking in make. The capacity given to
// NewMemory must still be memory the process can allocate.
const maxRegionLength = 1 << 40

// MaxRegionNameLen caps region names, which travel in protocol frames.
const MaxRegionNameLen = 128

// Register registers length bytes under name (see Device.RegisterRegion).
func (m *Memory) Register(name string, length uint64) (Region, error) {
	if name == "" || len(name) > MaxRegionNameLen {
		return Region{}, fmt.Errorf("rdma: region name must be 1..%d bytes, got %d", MaxRegionNameLen, len(name))
	}
	if length == 0 {
		return Region{}, fmt.Errorf("rdma: region %q: length must be positive", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.byName[name]; ok {
		if r.Length != length {
			return Region{}, fmt.Errorf("rdma: region %q already registered with length %d, not %d", name, r.Length, length)
		}
		return r.Region, nil
	}
	padded := (length + AtomicSize - 1) &^ (AtomicSize - 1)
	if padded < length || padded > maxRegionLength || m.used+padded > m.capacity || m.used+padded < m.used {
		return Region{}, fmt.Errorf("%w: region %q needs %d bytes, %d of %d free", ErrOutOfMemory, name, length, m.capacity-m.used, m.capacity)
	}
	rkey, err := m.newRKeyLocked()
	if err != nil {
		return Region{}, err
	}
	r := &region{
		Region: Region{Name: name, RKey: rkey, Addr: m.nextAddr, Length: length},
		words:  make([]uint64, padded/AtomicSize),
	}
	m.nextAddr += (padded + regionAlign - 1) &^ (regionAlign - 1)
	m.used += padded
	m.byKey[rkey] = r
	m.byName[name] = r
	return r.Region, nil
}

// Restore registers r at the rkey and address it was given when first
// registered, zero-filled: a durable memory node (rdma/durable) rebuilds its
// regions so, because compute nodes keep rkeys and addresses across a
// memory-node restart. It fails if the name, rkey or address range is taken
// or the capacity is exceeded.
func (m *Memory) Restore(r Region) error {
	if r.Name == "" || len(r.Name) > MaxRegionNameLen {
		return fmt.Errorf("rdma: restore: region name must be 1..%d bytes, got %d", MaxRegionNameLen, len(r.Name))
	}
	padded := (r.Length + AtomicSize - 1) &^ (AtomicSize - 1)
	if r.Length == 0 || padded < r.Length || padded > maxRegionLength || r.RKey == 0 || r.Addr < firstRegionAddr || r.Addr%regionAlign != 0 || r.Addr+padded < r.Addr {
		return fmt.Errorf("rdma: restore: invalid region %q (rkey %#x, addr %#x, length %d)", r.Name, r.RKey, r.Addr, r.Length)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byName[r.Name]; ok {
		return fmt.Errorf("rdma: restore: region %q already registered", r.Name)
	}
	if _, ok := m.byKey[r.RKey]; ok {
		return fmt.Errorf("rdma: restore: rkey %#x of region %q already in use", r.RKey, r.Name)
	}
	for _, o := range m.byKey {
		oEnd := o.Addr + uint64(len(o.words))*AtomicSize
		if r.Addr < oEnd && o.Addr < r.Addr+padded {
			return fmt.Errorf("rdma: restore: region %q at %#x overlaps region %q", r.Name, r.Addr, o.Name)
		}
	}
	if m.used+padded > m.capacity || m.used+padded < m.used {
		return fmt.Errorf("%w: restoring region %q needs %d bytes, %d of %d free", ErrOutOfMemory, r.Name, r.Length, m.capacity-m.used, m.capacity)
	}
	reg := &region{Region: r, words: make([]uint64, padded/AtomicSize)}
	m.used += padded
	m.byKey[r.RKey] = reg
	m.byName[r.Name] = reg
	m.nextAddr = max(m.nextAddr, r.Addr+((padded+regionAlign-1)&^(regionAlign-1)))
	return nil
}

// newRKeyLocked draws an unguessable, unused, non-zero rkey: a client must learn
// a region's rkey from the memory node, never derive it.
func (m *Memory) newRKeyLocked() (uint32, error) {
	var b [4]byte
	for range 64 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("rdma: drawing rkey: %w", err)
		}
		k := binary.LittleEndian.Uint32(b[:])
		if _, taken := m.byKey[k]; k != 0 && !taken {
			return k, nil
		}
	}
	return 0, fmt.Errorf("rdma: no free rkey after 64 draws")
}

// Regions lists registered regions by address.
func (m *Memory) Regions() []Region {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Region, 0, len(m.byKey))
	for _, r := range m.byKey {
		out = append(out, r.Region)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// Lookup returns the region registered under name.
func (m *Memory) Lookup(name string) (Region, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.byName[name]
	if !ok {
		return Region{}, false
	}
	return r.Region, true
}

// Execute runs one work request and returns its completion. It validates the
// request as a memory node must: a known opcode and length, a registered rkey,
// an address range inside that region, and 8-byte alignment for atomics.
// Nothing outside a registered region is ever read or written.
func (m *Memory) Execute(wr *WorkRequest) Completion {
	c := Completion{ID: wr.ID, Op: wr.Op}
	if err := ValidateLocal(wr); err != nil {
		c.Status = StatusLocalLengthError
		if wr.Op != OpRead && wr.Op != OpWrite && !wr.Op.IsAtomic() {
			c.Status = StatusRemoteInvalidRequest
		}
		return c
	}
	m.mu.RLock()
	r := m.byKey[wr.RKey]
	m.mu.RUnlock()
	n := uint64(len(wr.Local))
	if wr.Op.IsAtomic() {
		n = AtomicSize
	}
	if r == nil || !r.Contains(wr.RemoteAddr, n) {
		c.Status = StatusRemoteAccessError
		return c
	}
	off := wr.RemoteAddr - r.Addr
	switch wr.Op {
	case OpRead:
		r.read(off, wr.Local)
	case OpWrite:
		r.write(off, wr.Local)
	case OpCompareAndSwap:
		if off%AtomicSize != 0 {
			c.Status = StatusRemoteInvalidRequest
			return c
		}
		w := &r.words[off/AtomicSize]
		for {
			old := atomic.LoadUint64(w)
			if old != wr.Compare {
				c.Value = old
				break
			}
			if atomic.CompareAndSwapUint64(w, old, wr.Swap) {
				c.Value = old
				break
			}
		}
	case OpFetchAndAdd:
		if off%AtomicSize != 0 {
			c.Status = StatusRemoteInvalidRequest
			return c
		}
		c.Value = atomic.AddUint64(&r.words[off/AtomicSize], wr.Add) - wr.Add
	}
	return c
}

// read copies len(dst) bytes at byte offset off into dst, word by word.
func (r *region) read(off uint64, dst []byte) {
	var buf [AtomicSize]byte
	for len(dst) > 0 {
		wi, bi := off/AtomicSize, off%AtomicSize
		binary.LittleEndian.PutUint64(buf[:], atomic.LoadUint64(&r.words[wi]))
		k := copy(dst, buf[bi:])
		dst = dst[k:]
		off += uint64(k)
	}
}

// write copies src to byte offset off. Whole words are stored atomically;
// partly covered words are merged with a CAS loop so that bytes outside
// [off, off+len(src)) — possibly a neighbouring record's lock word — never change.
func (r *region) write(off uint64, src []byte) {
	var buf [AtomicSize]byte
	for len(src) > 0 {
		wi, bi := off/AtomicSize, off%AtomicSize
		w := &r.words[wi]
		if bi == 0 && len(src) >= AtomicSize {
			atomic.StoreUint64(w, binary.LittleEndian.Uint64(src))
			src = src[AtomicSize:]
			off += AtomicSize
			continue
		}
		var k int
		for {
			old := atomic.LoadUint64(w)
			binary.LittleEndian.PutUint64(buf[:], old)
			k = copy(buf[bi:], src)
			if atomic.CompareAndSwapUint64(w, old, binary.LittleEndian.Uint64(buf[:])) {
				break
			}
		}
		src = src[k:]
		off += uint64(k)
	}
}
