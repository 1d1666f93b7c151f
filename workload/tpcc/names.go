package tpcc

import "math/rand/v2"

var syllables = [10]string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// LastName renders last-name number n (0..999) as clause 4.3.2.3 does: the
// syllables of its three digits, e.g. 371 → "PRICALLYOUGHT".
func LastName(n int) string {
	return syllables[n/100%10] + syllables[n/10%10] + syllables[n%10]
}

var lastNameNumbers = func() map[string]uint32 {
	m := make(map[string]uint32, LastNames)
	for n := 0; n < LastNames; n++ {
		m[LastName(n)] = uint32(n)
	}
	return m
}()

// LastNameNumber parses a name LastName produced.
func LastNameNumber(s string) (uint32, bool) {
	n, ok := lastNameNumbers[s]
	return n, ok
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randText fills dst[:n] with random alphanumeric characters, n uniform in
// [minLen, len(dst)], and zeroes the rest.
func randText(r *rand.Rand, dst []byte, minLen int) {
	n := len(dst)
	if minLen < n {
		n = minLen + r.IntN(len(dst)-minLen+1)
	}
	var bits uint64
	for i := 0; i < n; i++ {
		if i%8 == 0 {
			bits = r.Uint64()
		}
		dst[i] = alnum[int(bits&0xFF)%len(alnum)]
		bits >>= 8
	}
	clear(dst[n:])
}
