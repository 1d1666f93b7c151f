package tcp

import "sync"

// poolMax is the largest buffer kept for reuse; bigger frames are rare (bulk
// READ/WRITE batches) and are left to the garbage collector.
const poolMax = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// getBuf returns an empty buffer with room for n bytes.
func getBuf(n int) []byte {
	if n > poolMax {
		return make([]byte, 0, n)
	}
	b := *bufPool.Get().(*[]byte)
	if cap(b) < n {
		return make([]byte, 0, max(n, 512))
	}
	return b[:0]
}

// putBuf returns a buffer obtained from getBuf; the caller must not use it again.
func putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > poolMax {
		return
	}
	b = b[:0]
	bufPool.Put(&b)
}
