package zipf

import (
	"errors"
	"fmt"
	"math"
)

// Source is the random source a generator draws from: a *rand.Rand of
// math/rand/v2 satisfies it. Float64 must return a value in [0, 1).
type Source interface {
	Float64() float64
}

// YCSB's constants for the scrambled generator.
const (
	// ScrambledItemCount is the size of the Zipfian the scrambled generator
	// draws from before hashing into its range (YCSB's ITEM_COUNT).
	ScrambledItemCount = 10_000_000_000
	// YCSBZipfianConstant is YCSB's default skew θ.
	YCSBZipfianConstant = 0.99
	// YCSBZetan is Zeta(ScrambledItemCount, 0.99) as YCSB hard-codes it.
	YCSBZetan = 26.46902820178302
	// ExactZetaLimit is the largest n whose zeta is summed term by term.
	ExactZetaLimit = 1 << 20
	// emStart is where the Euler–Maclaurin tail starts (terms below it are
	// summed exactly); at 1024 the neglected remainder is below 1e-25.
	emStart = 1024
)

// Zipfian draws integers in [Min, Max] with P(Min+i) ∝ 1/(i+1)^θ: Min is the
// most popular item (rank 1), Min+1 the second, and so on.
type Zipfian struct {
	min, items uint64
	theta      float64
	zetan      float64
	alpha      float64
	eta        float64
	halfPowT   float64 // 0.5^θ
}

// NewZipfian returns a Zipfian over [min, max] with skew θ ∈ [0, 1).
func NewZipfian(min, max uint64, theta float64) (*Zipfian, error) {
	if err := checkArgs(min, max, theta); err != nil {
		return nil, err
	}
	return newZipfian(min, max, theta, Zeta(max-min+1, theta)), nil
}

// NewZipfianZetan is NewZipfian with a precomputed Zeta(max-min+1, θ).
func NewZipfianZetan(min, max uint64, theta, zetan float64) (*Zipfian, error) {
	if err := checkArgs(min, max, theta); err != nil {
		return nil, err
	}
	if !(zetan >= 1) || math.IsInf(zetan, 0) {
		return nil, fmt.Errorf("zipf: zetan %v, want a finite value ≥ 1", zetan)
	}
	return newZipfian(min, max, theta, zetan), nil
}

func checkArgs(min, max uint64, theta float64) error {
	var errs []error
	if max < min {
		errs = append(errs, fmt.Errorf("zipf: max %d < min %d", max, min))
	}
	if min == 0 && max == math.MaxUint64 {
		errs = append(errs, errors.New("zipf: the range must have fewer than 2^64 items"))
	}
	if !(theta >= 0 && theta < 1) {
		errs = append(errs, fmt.Errorf("zipf: theta %v, want 0 ≤ θ < 1", theta))
	}
	return errors.Join(errs...)
}

func newZipfian(min, max uint64, theta, zetan float64) *Zipfian {
	items := max - min + 1
	zeta2 := Zeta(2, theta)
	z := &Zipfian{
		min:      min,
		items:    items,
		theta:    theta,
		zetan:    zetan,
		alpha:    1 / (1 - theta),
		halfPowT: math.Pow(0.5, theta),
	}
	// YCSB: eta = (1 - (2/n)^(1-θ)) / (1 - zeta(2,θ)/zetan). With n ≤ 2 the
	// denominator may vanish, but then the first two branches of Next always
	// apply (u·zetan < zetan ≤ 1 + 0.5^θ) and eta is never used.
	z.eta = (1 - math.Pow(2/float64(items), 1-theta)) / (1 - zeta2/zetan)
	return z
}

// Items is the number of items in the range.
func (z *Zipfian) Items() uint64 { return z.items }

// Theta is the skew.
func (z *Zipfian) Theta() float64 { return z.theta }

// Zetan is Zeta(Items, Theta) as used by the generator.
func (z *Zipfian) Zetan() float64 { return z.zetan }

// Prob is the exact probability of the item of the given 1-based rank under
// the Zipf law the generator approximates: rank^-θ / zetan. Gray's algorithm
// returns rank 1 with exactly this probability, rank 2 with nearly it, and
// approximates the rest (ranks 3..9 come out up to ~11% too often at
// θ = 0.99, as in YCSB).
func (z *Zipfian) Prob(rank uint64) float64 {
	if rank == 0 || rank > z.items {
		return 0
	}
	return math.Pow(float64(rank), -z.theta) / z.zetan
}

// Next draws one item.
func (z *Zipfian) Next(src Source) uint64 {
	u := src.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return z.min
	}
	if uz < 1+z.halfPowT {
		if z.items < 2 {
			return z.min
		}
		return z.min + 1
	}
	v := float64(z.items) * math.Pow(z.eta*u-z.eta+1, z.alpha)
	if !(v >= 0) { // NaN guard; cannot happen for items ≥ 3
		return z.min
	}
	if v >= float64(z.items) {
		return z.min + z.items - 1
	}
	off := uint64(v)
	if off >= z.items {
		off = z.items - 1
	}
	return z.min + off
}

// Scrambled is YCSB's ScrambledZipfianGenerator: a Zipfian over
// ScrambledItemCount items whose draw is hashed (FNV-1a 64) into [Min, Max].
// Popularity follows the Zipf law but the popular items are scattered.
type Scrambled struct {
	min, items uint64
	z          *Zipfian
}

// NewScrambled returns a scrambled Zipfian over [min, max] with skew θ ∈
// [0, 1). With θ = 0.99 it uses YCSB's hard-coded zetan; otherwise the zeta
// of 10^10 items is computed (Euler–Maclaurin, fast).
func NewScrambled(min, max uint64, theta float64) (*Scrambled, error) {
	if err := checkArgs(min, max, theta); err != nil {
		return nil, err
	}
	zetan := YCSBZetan
	if theta != YCSBZipfianConstant {
		zetan = Zeta(ScrambledItemCount+1, theta)
	}
	// YCSB builds ZipfianGenerator(0, ITEM_COUNT, θ, zetan): ITEM_COUNT + 1
	// items with the zeta of ITEM_COUNT items (a harmless off-by-one of the
	// original that we keep for fidelity when θ = 0.99).
	return &Scrambled{min: min, items: max - min + 1, z: newZipfian(0, ScrambledItemCount, theta, zetan)}, nil
}

// Items is the number of items in the range.
func (s *Scrambled) Items() uint64 { return s.items }

// Next draws one item.
func (s *Scrambled) Next(src Source) uint64 {
	return s.min + FNVHash64(s.z.Next(src))%s.items
}

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian bytes
// of v (read with Java's arithmetic shift, v taken as a signed long), with
// Java's Math.abs applied to the signed result.
func FNVHash64(v uint64) uint64 {
	const (
		offset = 0xCBF29CE484222325
		prime  = 1099511628211
	)
	h := uint64(offset)
	for range 8 {
		h ^= v & 0xff
		v = uint64(int64(v) >> 8) // Java's >> is arithmetic
		h *= prime
	}
	if int64(h) < 0 {
		h = -h // Math.abs; MinInt64 stays MinInt64 as in Java
	}
	return h
}

// Zeta returns Σ_{i=1..n} i^-θ. Up to ExactZetaLimit terms it sums exactly
// in YCSB's order; beyond, the first 1023 terms are summed and the tail is the
// Euler–Maclaurin approximation with three correction terms.
func Zeta(n uint64, theta float64) float64 {
	if n <= ExactZetaLimit {
		sum := 0.0
		for i := uint64(0); i < n; i++ {
			sum += 1 / math.Pow(float64(i+1), theta)
		}
		return sum
	}
	const a = emStart
	head := 0.0
	for i := uint64(0); i < a-1; i++ {
		head += 1 / math.Pow(float64(i+1), theta)
	}
	// Σ_{i=a..n} f(i) with f(x) = x^-θ.
	fa, fn := float64(a), float64(n)
	f := func(x float64) float64 { return math.Pow(x, -theta) }
	var integral float64
	if theta == 1 {
		integral = math.Log(fn / fa)
	} else {
		integral = (math.Pow(fn, 1-theta) - math.Pow(fa, 1-theta)) / (1 - theta)
	}
	t := theta
	d1 := func(x float64) float64 { return -t * math.Pow(x, -t-1) }
	d3 := func(x float64) float64 { return -t * (t + 1) * (t + 2) * math.Pow(x, -t-3) }
	d5 := func(x float64) float64 { return -t * (t + 1) * (t + 2) * (t + 3) * (t + 4) * math.Pow(x, -t-5) }
	tail := integral + (f(fa)+f(fn))/2 +
		(d1(fn)-d1(fa))/12 -
		(d3(fn)-d3(fa))/720 +
		(d5(fn)-d5(fa))/30240
	return head + tail
}
