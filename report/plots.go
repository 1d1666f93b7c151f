package report

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/aura-runtime/aura/bench"
)

const (
	// MaxPoints bounds the points of one line: longer timelines are thinned
	// evenly (every k-th sample, the last one kept).
	MaxPoints = 2000
	// MaxHeatColumns bounds the time columns of a heat map, thinned the
	// same way; its rows are at most bench.MaxOwnerKeyGroups.
	MaxHeatColumns = 400
	// maxCNLines bounds the lines of a per-CN plot: with more CNs it shows
	// the minimum, mean and maximum instead.
	maxCNLines = 16
	// Image sizes, at dpi: 960 × 480 and 960 × 600 pixels.
	dpi        = 96
	lineWidth  = 10 * vg.Inch
	lineHeight = 5 * vg.Inch
	heatHeight = 6.25 * vg.Inch
)

// plotFile is one rendered plot.
type plotFile struct {
	Name    string // file name in the report directory
	Title   string
	Caption string
	png     []byte
}

// series is one line: a run's values over its timeline.
type series struct {
	label string
	xys   plotter.XYs
}

// metric is a timeline figure plotted for every run on shared axes.
type metric struct {
	file, title, ylabel, caption string
	value                        func(bench.Sample) float64
}

var metrics = []metric{
	{"plot-throughput.png", "Throughput", "transactions / s", "Completed transactions per second in each sample interval.",
		func(s bench.Sample) float64 { return s.ThroughputTPS }},
	{"plot-atomics.png", "Memory-node atomics per transaction", "atomics / txn", "MN CAS + FAA per completed transaction in each interval.",
		func(s bench.Sample) float64 { return s.AtomicPerTxn }},
	{"plot-local-hit.png", "LOCAL hit", "% of lock acquisitions", "Share of lock acquisitions granted by the transaction's own node.",
		func(s bench.Sample) float64 { return 100 * s.LocalHit }},
	{"plot-remote-locks.png", "Remote lock operations per transaction", "(owner RPC + MN CAS) / txn", "Lock acquisitions that left the node, per completed transaction in each interval.",
		func(s bench.Sample) float64 { return s.RemoteLockOps }},
	{"plot-cohorts.png", "Cohorts", "cohorts in the published map", "Cohorts of the OwnerMap in force at each sample (0 for mn-only).",
		func(s bench.Sample) float64 { return float64(s.Cohorts) }},
	{"plot-migrations.png", "Migrations", "cohorts moved since the start", "Cumulative ownership moves (aura; the fixed maps never move).",
		func(s bench.Sample) float64 { return float64(s.Migrations) }},
}

// thin returns the indexes of at most limit of n samples, evenly spaced,
// the last always included.
func thin(n, limit int) []int {
	step := max(1, (n+limit-1)/limit)
	var idx []int
	for i := 0; i < n; i += step {
		idx = append(idx, i)
	}
	if n > 0 && idx[len(idx)-1] != n-1 {
		if len(idx) == limit {
			idx[len(idx)-1] = n - 1
		} else {
			idx = append(idx, n-1)
		}
	}
	return idx
}

func timelineSeries(runs []bench.Result, value func(bench.Sample) float64) []series {
	out := make([]series, 0, len(runs))
	for _, r := range runs {
		s := series{label: runLabel(r)}
		for _, i := range thin(len(r.Timeline), MaxPoints) {
			v := value(r.Timeline[i])
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			s.xys = append(s.xys, plotter.XY{X: r.Timeline[i].TS, Y: v})
		}
		out = append(out, s)
	}
	return out
}

// linePlot draws one line per series on shared axes, with a dashed
// vertical line at the end of the warm-up when warmup > 0, and returns the
// legend to draw beside it.
func linePlot(title, xlabel, ylabel string, ss []series, warmup float64) (*plot.Plot, *plot.Legend, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Min, p.Y.Min = 0, 0
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	ymax := 0.0
	for i, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, nil, err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		legend.Add(s.label, l)
		for _, xy := range s.xys {
			ymax = max(ymax, xy.Y)
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	p.Y.Max = ymax * 1.05
	if warmup > 0 {
		w, err := plotter.NewLine(plotter.XYs{{X: warmup, Y: 0}, {X: warmup, Y: p.Y.Max}})
		if err != nil {
			return nil, nil, err
		}
		w.Color = color.Gray{Y: 128}
		w.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(w)
		legend.Add("warm-up end", w)
	}
	return p, &legend, nil
}

// renderWithLegend draws p with side, when not nil, as a legend in a
// column to the right of the plot (so it covers no data).
func renderWithLegend(p *plot.Plot, side *plot.Legend, w, h vg.Length) ([]byte, error) {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(c)
	if side != nil {
		const col = 1.5 * vg.Inch
		p.Draw(draw.Crop(dc, 0, -col, 0, 0))
		side.Draw(draw.Crop(dc, w-col+vg.Points(8), 0, 0, -vg.Points(30)))
	} else {
		p.Draw(dc)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plots renders every plot of the report.
func plots(runs []bench.Result) ([]plotFile, error) {
	warmup := 0.0
	if len(runs) > 0 {
		warmup = runs[0].Params.WarmupS
	}
	var out []plotFile
	for _, m := range metrics {
		p, l, err := linePlot(m.title, "time (s)", m.ylabel, timelineSeries(runs, m.value), warmup)
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", m.file, err)
		}
		b, err := renderWithLegend(p, l, lineWidth, lineHeight)
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", m.file, err)
		}
		out = append(out, plotFile{Name: m.file, Title: m.title, Caption: m.caption, png: b})
	}
	if hasCNLoad(runs) {
		p, l, err := linePlot("Load imbalance across compute nodes", "time (s)", "busiest CN / mean CN throughput",
			timelineSeries(runs, imbalance), warmup)
		if err != nil {
			return nil, err
		}
		b, err := renderWithLegend(p, l, lineWidth, lineHeight)
		if err != nil {
			return nil, err
		}
		out = append(out, plotFile{Name: "plot-cn-imbalance.png", Title: "Load imbalance",
			Caption: "Throughput of the busiest compute node over the mean of all (1 = even load).", png: b})
		for i, r := range runs {
			if !runHasCNLoad(r) {
				continue
			}
			p, l, err := linePlot(fmt.Sprintf("Per-CN throughput: %s", runLabel(r)), "time (s)", "transactions / s", cnSeries(r), warmup)
			if err != nil {
				return nil, err
			}
			b, err := renderWithLegend(p, l, lineWidth, lineHeight)
			if err != nil {
				return nil, err
			}
			out = append(out, plotFile{Name: fmt.Sprintf("plot-cn-%d-%s.png", i, fileSafe(r.Mode)),
				Title: "Per-CN load: " + runLabel(r), Caption: "Transactions each compute node completed per second (by home CN).", png: b})
		}
	}
	for i, r := range runs {
		g := ownerGridOf(r)
		if g == nil {
			continue
		}
		p, legend := heatPlot(r, g)
		b, err := renderWithLegend(p, legend, lineWidth, heatHeight)
		if err != nil {
			return nil, err
		}
		out = append(out, plotFile{Name: fmt.Sprintf("plot-owners-%d-%s.png", i, fileSafe(r.Mode)),
			Title: "Key group → owner: " + runLabel(r),
			Caption: fmt.Sprintf("Owner of %d key groups of the published OwnerMap (sampled by hash, rows sorted by final owner) at each sample; blank: in no cohort (fallback, MN CAS).",
				len(g.rows)), png: b})
	}
	return out, nil
}

func runHasCNLoad(r bench.Result) bool {
	for _, s := range r.Timeline {
		if len(s.CNTPS) > 0 {
			return true
		}
	}
	return false
}

func hasCNLoad(runs []bench.Result) bool {
	return slices.ContainsFunc(runs, runHasCNLoad)
}

// imbalance is the busiest CN's throughput over the mean (NaN, not
// plotted, with no load).
func imbalance(s bench.Sample) float64 {
	var sum, mx float64
	for _, v := range s.CNTPS {
		sum += v
		mx = max(mx, v)
	}
	if sum == 0 {
		return math.NaN()
	}
	return mx / (sum / float64(len(s.CNTPS)))
}

// cnSeries is one line per CN, or minimum/mean/maximum with more than
// maxCNLines CNs.
func cnSeries(r bench.Result) []series {
	n := 0
	for _, s := range r.Timeline {
		n = max(n, len(s.CNTPS))
	}
	idx := thin(len(r.Timeline), MaxPoints)
	if n <= maxCNLines {
		out := make([]series, n)
		for cn := range n {
			out[cn].label = fmt.Sprintf("CN %d", cn)
			for _, i := range idx {
				if s := r.Timeline[i]; cn < len(s.CNTPS) {
					out[cn].xys = append(out[cn].xys, plotter.XY{X: s.TS, Y: s.CNTPS[cn]})
				}
			}
		}
		return out
	}
	out := []series{{label: "min CN"}, {label: "mean"}, {label: "max CN"}}
	for _, i := range idx {
		s := r.Timeline[i]
		if len(s.CNTPS) == 0 {
			continue
		}
		lo, hi, sum := math.Inf(1), 0.0, 0.0
		for _, v := range s.CNTPS {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		out[0].xys = append(out[0].xys, plotter.XY{X: s.TS, Y: lo})
		out[1].xys = append(out[1].xys, plotter.XY{X: s.TS, Y: sum / float64(len(s.CNTPS))})
		out[2].xys = append(out[2].xys, plotter.XY{X: s.TS, Y: hi})
	}
	return out
}

// ownerGrid is a heat map's cells: column c is a sample time, row r a key
// group, the value its owner (NaN: in no cohort).
type ownerGrid struct {
	xs    []float64
	rows  []uint64 // key groups, bottom to top
	z     [][]float64
	nodes int // owners are 0..nodes-1
}

func (g *ownerGrid) Dims() (int, int)   { return len(g.xs), len(g.rows) }
func (g *ownerGrid) Z(c, r int) float64 { return g.z[c][r] }
func (g *ownerGrid) X(c int) float64    { return g.xs[c] }
func (g *ownerGrid) Y(r int) float64    { return float64(r) }
func (g *ownerGrid) Min() float64       { return 0 }
func (g *ownerGrid) Max() float64       { return float64(max(1, g.nodes-1)) }
func (g *ownerGrid) paletteSize() int   { return max(2, g.nodes) }

// ownerGridOf builds r's heat map from its timeline's OwnerMap samples
// (nil when it has none), applying the carry-forward rule of
// bench.Sample.Owners.
func ownerGridOf(r bench.Result) *ownerGrid {
	// Ownership in force at every sample.
	cur := make([]*bench.OwnerSample, len(r.Timeline))
	var last *bench.OwnerSample
	seen := map[uint64]int{} // key group → samples it appears in
	nodes := r.CNs
	for i, s := range r.Timeline {
		if s.Owners != nil {
			last = s.Owners
			for j, kg := range last.KeyGroups {
				seen[kg]++
				if j < len(last.Owner) {
					nodes = max(nodes, last.Owner[j]+1)
				}
			}
		}
		cur[i] = last
	}
	if last == nil {
		return nil
	}
	// Rows: the key groups sampled longest (ties by the sampling hash),
	// at most bench.MaxOwnerKeyGroups, sorted by final owner then key group
	// so that each owner's key groups form a band.
	kgs := make([]uint64, 0, len(seen))
	for kg := range seen {
		kgs = append(kgs, kg)
	}
	slices.SortFunc(kgs, func(a, b uint64) int {
		if c := cmp.Compare(seen[b], seen[a]); c != 0 {
			return c
		}
		return cmp.Compare(bench.SampleHash(a), bench.SampleHash(b))
	})
	kgs = kgs[:min(len(kgs), bench.MaxOwnerKeyGroups)]
	final := ownerOf(last)
	slices.SortFunc(kgs, func(a, b uint64) int {
		oa, oka := final[a]
		ob, okb := final[b]
		if !oka {
			oa = math.MaxInt
		}
		if !okb {
			ob = math.MaxInt
		}
		if c := cmp.Compare(oa, ob); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	g := &ownerGrid{rows: kgs, nodes: nodes}
	for _, i := range thin(len(r.Timeline), MaxHeatColumns) {
		col := make([]float64, len(kgs))
		owners := ownerOf(cur[i])
		for j, kg := range kgs {
			col[j] = math.NaN()
			if o, ok := owners[kg]; ok {
				col[j] = float64(o)
			}
		}
		g.xs = append(g.xs, r.Timeline[i].TS)
		g.z = append(g.z, col)
	}
	return g
}

// fineGrid repeats each cell of a grid kx × ky times, so that the heat
// map's raster is about as fine as the image: scaling it up then blurs
// only the cells' edges, by a pixel (drawn as vectors instead, every two
// cells would have a seam of anti-aliasing between them). It places the
// columns evenly from the first sample time to the last (the timelines
// are sampled at a fixed period).
type fineGrid struct {
	g        *ownerGrid
	kx, ky   int
	x0, step float64
}

func newFineGrid(g *ownerGrid) *fineGrid {
	c, r := g.Dims()
	f := &fineGrid{g: g, kx: max(1, (800+c-1)/c), ky: max(1, (500+r-1)/r), x0: g.xs[0], step: 1}
	if c > 1 && g.xs[c-1] > g.xs[0] {
		f.step = (g.xs[c-1] - g.xs[0]) / float64(c-1)
	}
	return f
}

func (f *fineGrid) Dims() (int, int) {
	c, r := f.g.Dims()
	return c * f.kx, r * f.ky
}
func (f *fineGrid) Z(c, r int) float64 { return f.g.z[c/f.kx][r/f.ky] }
func (f *fineGrid) X(c int) float64 {
	return f.x0 - f.step/2 + (float64(c)+0.5)*f.step/float64(f.kx)
}
func (f *fineGrid) Y(r int) float64 { return -0.5 + (float64(r)+0.5)/float64(f.ky) }
func (f *fineGrid) Min() float64    { return f.g.Min() }
func (f *fineGrid) Max() float64    { return f.g.Max() }

func ownerOf(o *bench.OwnerSample) map[uint64]int {
	m := map[uint64]int{}
	if o == nil {
		return m
	}
	for j, kg := range o.KeyGroups {
		if j < len(o.Owner) {
			m[kg] = o.Owner[j]
		}
	}
	return m
}

// nodeColors gives each owner a distinct color: the plot's qualitative
// colors for a few nodes, a rainbow for many.
func nodeColors(n int) []color.Color {
	if n <= len(plotutil.DarkColors) {
		return plotutil.DarkColors[:n]
	}
	return palette.Rainbow(n, palette.Red, palette.Magenta, 0.8, 0.9, 1).Colors()
}

type fixedPalette []color.Color

func (p fixedPalette) Colors() []color.Color { return p }

// swatch is a legend entry that is a filled box of one color.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.c)
	c.Fill(c.Rectangle.Path())
}

// heatPlot is r's heat map and, for at most maxCNLines nodes, its color
// legend (nil for more: the colors then run as a rainbow by node index).
func heatPlot(r bench.Result, g *ownerGrid) (*plot.Plot, *plot.Legend) {
	cols := nodeColors(g.paletteSize())
	hm := plotter.NewHeatMap(newFineGrid(g), fixedPalette(cols))
	hm.Rasterized = true
	hm.NaN = color.White
	p := plot.New()
	p.Title.Text = "Key group → owner over time: " + runLabel(r)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = fmt.Sprintf("%d sampled key groups (by final owner)", len(g.rows))
	p.Y.Tick.Marker = plot.ConstantTicks(nil)
	p.Add(hm)
	if g.nodes > maxCNLines {
		return p, nil
	}
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	for i := range g.nodes {
		l.Add(fmt.Sprintf("CN %d", i), swatch{cols[i]})
	}
	return p, &l
}
