package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Charts are hand-written SVG: a fixed frame, linear or log axes, one
// polyline or bar group per policy. Lines differ in colour, dash pattern and
// marker shape, so lines that coincide (policies with equal results) stay
// visible: a dashed line over a solid one shows both, and the markers of
// each line are drawn at different points.

var plotColors = []string{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#000000"}

// plotDashes are the stroke-dasharray of line i; solid first.
var plotDashes = []string{"", "8 4", "3 3", "12 4 3 4", "6 2", "2 6", "10 3 2 3 2 3"}

// marker draws marker shape i (circle, square, triangle, diamond, cross, x)
// centred at x, y.
func marker(i int, x, y float64, color string) string {
	const r = 3.5
	switch i % 6 {
	case 0:
		return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`, x, y, r, color)
	case 1:
		return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x-r, y-r, 2*r, 2*r, color)
	case 2:
		return fmt.Sprintf(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r-1, x-r-1, y+r, x+r+1, y+r, color)
	case 3:
		return fmt.Sprintf(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r-1, x+r+1, y, x, y+r+1, x-r-1, y, color)
	case 4:
		return fmt.Sprintf(`<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1f" stroke="%s" stroke-width="2.5"/>`, x-r-1, y, x+r+1, x, y-r-1, y+r+1, color)
	}
	return fmt.Sprintf(`<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2.5"/>`, x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, color)
}

func plotColor(i int) string { return plotColors[i%len(plotColors)] }

func plotDash(i int) string {
	if d := plotDashes[i%len(plotDashes)]; d != "" {
		return fmt.Sprintf(` stroke-dasharray="%s"`, d)
	}
	return ""
}

const (
	plotW, plotH           = 720, 420
	padL, padR, padT, padB = 70, 170, 40, 50
)

type svgChart struct {
	b          strings.Builder
	xmin, xmax float64
	ymin, ymax float64
	logX, logY bool
	// intX ticks the x axis at integers only (replica indexes).
	intX bool
}

func newChart(title, xlabel, ylabel string, xmin, xmax, ymin, ymax float64, logX bool) *svgChart {
	return newChartY(title, xlabel, ylabel, xmin, xmax, ymin, ymax, logX, false)
}

func newChartY(title, xlabel, ylabel string, xmin, xmax, ymin, ymax float64, logX, logY bool) *svgChart {
	c := &svgChart{xmin: xmin, xmax: xmax, ymin: ymin, ymax: ymax, logX: logX, logY: logY}
	c.frame(title, xlabel, ylabel)
	y0, y1 := plotH-padB, padT
	if logX {
		for e := math.Floor(math.Log10(xmin)); e <= math.Log10(xmax); e++ {
			v := math.Pow(10, e)
			if v < xmin {
				continue
			}
			x := c.x(v)
			fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, x, y1, y0, x, y0+16, fmtTick(v))
		}
	} else {
		for i := 0; i <= 5; i++ {
			v := xmin + (xmax-xmin)*float64(i)/5
			x := c.x(v)
			fmt.Fprintf(&c.b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, y0+16, fmtTick(v))
		}
	}
	return c
}

// frame draws the background, title, axis labels, the plot box and the y
// ticks (powers of ten on a log axis, five even steps otherwise).
func (c *svgChart) frame(title, xlabel, ylabel string) {
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&c.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&c.b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(title))
	x0, y0, x1, y1 := padL, plotH-padB, plotW-padR, padT
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", x0, y1, x1-x0, y0-y1)
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, esc(xlabel))
	fmt.Fprintf(&c.b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, esc(ylabel))
	var yticks []float64
	if c.logY {
		for e := math.Floor(math.Log10(c.ymin)); e <= math.Log10(c.ymax)+1e-9; e++ {
			if v := math.Pow(10, e); v >= c.ymin {
				yticks = append(yticks, v)
			}
		}
	} else {
		for i := 0; i <= 4; i++ {
			yticks = append(yticks, c.ymin+(c.ymax-c.ymin)*float64(i)/4)
		}
	}
	for _, v := range yticks {
		y := c.y(v)
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, x1, y, y, x0-6, y+4, fmtTick(v))
	}
}

// fmtCount writes a count readably: 20,000 rather than 20000.
func fmtCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// xTicks labels the x axis at the given values (a sweep's rates).
func (c *svgChart) xTicks(vs []float64) {
	for _, v := range vs {
		x := c.x(v)
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, x, padT, plotH-padB, x, plotH-padB+16, fmtTick(v))
	}
}

// fmtTick writes an axis value readably: 12k rather than 12000, 1.5M rather
// than 1500000, 0.25 rather than 0.25000001.
func fmtTick(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), "0"), ".") + "M"
	case a >= 1e3:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), "0"), ".") + "k"
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func (c *svgChart) x(v float64) float64 {
	f := (v - c.xmin) / (c.xmax - c.xmin)
	if c.logX {
		f = (math.Log10(max(v, c.xmin)) - math.Log10(c.xmin)) / (math.Log10(c.xmax) - math.Log10(c.xmin))
	}
	return padL + f*float64(plotW-padR-padL)
}

func (c *svgChart) y(v float64) float64 {
	f := (v - c.ymin) / (c.ymax - c.ymin)
	if c.logY {
		f = (math.Log10(max(v, c.ymin)) - math.Log10(c.ymin)) / (math.Log10(c.ymax) - math.Log10(c.ymin))
	}
	return float64(plotH-padB) - f*float64(plotH-padB-padT)
}

// legend draws entry i: a line sample in the line's colour and dash with
// its marker, then the name.
func (c *svgChart) legend(i int, name string) {
	y := padT + 10 + 20*i
	x := plotW - padR + 10
	fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>%s<text x="%d" y="%d">%s</text>`+"\n",
		x, x+26, y-4, y-4, plotColor(i), plotDash(i), marker(i, float64(x+13), float64(y-4), plotColor(i)), x+32, y, esc(name))
}

// legendBox draws entry i as a filled box (bar charts).
func (c *svgChart) legendBox(i int, name string) {
	y := padT + 10 + 20*i
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", plotW-padR+12, y-9, plotColor(i), plotW-padR+32, y, esc(name))
}

// line draws policy i's line with its dash pattern; markers go on every
// point when there are few (a rate sweep), else on about 8 points offset by
// i so that coinciding lines show each other's markers.
func (c *svgChart) line(i int, xs, ys []float64) {
	var pts []string
	var at [][2]float64
	for k := range xs {
		if math.IsNaN(ys[k]) || math.IsInf(ys[k], 0) {
			continue
		}
		px, py := c.x(xs[k]), c.y(ys[k])
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		at = append(at, [2]float64{px, py})
	}
	fmt.Fprintf(&c.b, `<polyline fill="none" stroke-width="2" stroke="%s"%s points="%s"/>`+"\n", plotColor(i), plotDash(i), strings.Join(pts, " "))
	if len(at) == 0 {
		return
	}
	if len(at) <= 16 {
		for _, p := range at {
			c.b.WriteString(marker(i, p[0], p[1], plotColor(i)) + "\n")
		}
		return
	}
	step := len(at) / 8
	for k := (i * step / 7) % step; k < len(at); k += step {
		c.b.WriteString(marker(i, at[k][0], at[k][1], plotColor(i)) + "\n")
	}
}

func (c *svgChart) done() string { return c.b.String() + "</svg>\n" }

// WritePlots writes ttft-cdf.svg, share.svg and hit-rate.svg into dir, and
// for a sweep sweep-ttft-p90.svg and sweep-output-tps.svg; it returns the
// paths it wrote, in that order.
func (r *Report) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	type file struct{ name, svg string }
	files := []file{{"ttft-cdf.svg", r.ttftCDF()}, {"share.svg", r.shareChart()}, {"hit-rate.svg", r.hitChart()}}
	if len(r.Sweep) > 0 {
		files = append(files, file{"sweep-ttft-p90.svg", r.sweepChart(true)}, file{"sweep-output-tps.svg", r.sweepChart(false)})
	}
	var wrote []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(f.svg), 0o644); err != nil {
			return wrote, err
		}
		wrote = append(wrote, path)
	}
	return wrote, nil
}

// sweepChart plots every policy's TTFT p90 (log scale, with the SLO as a
// dashed line) or output tokens per second against the rate multiplier.
func (r *Report) sweepChart(ttft bool) string {
	var rates []float64
	for _, pt := range r.Sweep {
		rates = append(rates, pt.Rate)
	}
	val := func(p PolicyResult) float64 {
		if ttft {
			return math.Max(p.TTFT.P90, 1)
		}
		return p.OutputTokensPerSec
	}
	lo, hi := math.Inf(1), 0.0
	for _, pt := range r.Sweep {
		for _, p := range pt.Policies {
			lo, hi = min(lo, val(p)), max(hi, val(p))
		}
	}
	if ttft {
		hi = max(hi, r.SLO)
	}
	logX := len(rates) > 1 && rates[len(rates)-1]/rates[0] >= 4
	xmin, xmax := rates[0], rates[len(rates)-1]
	if xmin == xmax {
		xmin, xmax = xmin/2, xmax*2
	}
	var c *svgChart
	if ttft {
		lo = math.Pow(10, math.Floor(math.Log10(max(lo, 1))))
		hi = math.Pow(10, math.Ceil(math.Log10(max(hi, 10))))
		c = &svgChart{xmin: xmin, xmax: xmax, ymin: lo, ymax: hi, logX: logX, logY: true}
		c.frame(fmt.Sprintf("TTFT p90 against rate — %s, %d replicas", r.Workload, r.Replicas), "arrival rate (× the workload's base rate)", "TTFT p90 (ms, log scale)")
	} else {
		c = &svgChart{xmin: xmin, xmax: xmax, ymin: 0, ymax: niceCeil(hi), logX: logX}
		c.frame(fmt.Sprintf("Output tokens/s against rate — %s, %d replicas", r.Workload, r.Replicas), "arrival rate (× the workload's base rate)", "output tokens per virtual second")
	}
	c.xTicks(rates)
	for i, p := range r.Sweep[0].Policies {
		c.legend(i, p.Name)
		var ys []float64
		for _, pt := range r.Sweep {
			y := math.NaN()
			for _, q := range pt.Policies {
				if q.Name == p.Name {
					y = val(q)
				}
			}
			ys = append(ys, y)
		}
		c.line(i, rates, ys)
	}
	if ttft {
		y := c.y(r.SLO)
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="4 3"/><text x="%d" y="%.1f" text-anchor="end">SLO %s ms</text>`+"\n", padL, plotW-padR, y, y, plotW-padR-4, y-4, fmtTick(r.SLO))
	}
	return c.done()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func (r *Report) ttftCDF() string {
	lo, hi := math.Inf(1), 1.0
	for _, p := range r.Policies {
		if len(p.TTFTs) > 0 {
			lo = min(lo, p.TTFTs[0])
			hi = max(hi, p.TTFTs[len(p.TTFTs)-1])
		}
	}
	lo = math.Max(1, math.Pow(10, math.Floor(math.Log10(math.Max(lo, 1)))))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	c := newChart(fmt.Sprintf("TTFT CDF — %s, %d replicas", r.Workload, r.Replicas), "TTFT (ms, log scale)", "fraction of requests", lo, hi, 0, 1, true)
	for i, p := range r.Policies {
		c.legend(i, p.Name)
		n := len(p.TTFTs)
		var xs, ys []float64
		step := max(1, n/400)
		for k := 0; k < n; k += step {
			xs = append(xs, p.TTFTs[k])
			ys = append(ys, float64(k+1)/float64(n))
		}
		if n > 0 {
			xs, ys = append(xs, p.TTFTs[n-1]), append(ys, 1)
		}
		c.line(i, xs, ys)
	}
	return c.done()
}

func (r *Report) shareChart() string {
	maxN, top := 0, 0.0
	for _, p := range r.Policies {
		maxN = max(maxN, len(p.Share))
		for _, s := range p.Share {
			top = max(top, s)
		}
	}
	top = math.Ceil(top*20) / 20
	c := &svgChart{xmin: 0, xmax: float64(maxN), ymin: 0, ymax: top, intX: true}
	c.frame(fmt.Sprintf("Per-replica share — %s", r.Workload), "replica", fmt.Sprintf("share of requests (%s requests)", fmtCount(r.Requests)))
	groupW := float64(plotW-padR-padL) / float64(max(maxN, 1))
	barW := groupW * 0.8 / float64(max(len(r.Policies), 1))
	for k := range maxN {
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", float64(padL)+groupW*(float64(k)+0.5), plotH-padB+16, k)
	}
	for i, p := range r.Policies {
		c.legendBox(i, p.Name)
		for k, s := range p.Share {
			x := float64(padL) + groupW*float64(k) + groupW*0.1 + barW*float64(i)
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, c.y(s), barW, c.y(0)-c.y(s), plotColor(i))
		}
	}
	if maxN > 0 {
		ideal := 1 / float64(r.Replicas)
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="4 3"/><text x="%d" y="%.1f" text-anchor="end">1/n</text>`+"\n", padL, plotW-padR, c.y(ideal), c.y(ideal), plotW-padR-4, c.y(ideal)-4)
	}
	return c.done()
}

func (r *Report) hitChart() string {
	span := r.VirtualSeconds
	c := newChart(fmt.Sprintf("Prefix-cache hit rate over time — %s", r.Workload), "arrival time (virtual s)", "hit rate (token-weighted)", 0, math.Max(span, 1), 0, 1, false)
	for i, p := range r.Policies {
		c.legend(i, p.Name)
		xs := make([]float64, len(p.HitSeries))
		for k := range xs {
			xs[k] = (float64(k) + 0.5) / float64(len(xs)) * span
		}
		c.line(i, xs, p.HitSeries)
	}
	for k, t := range r.ScaleTimes {
		x := c.x(t)
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-dasharray="6 4"/><text x="%.1f" y="%d">%s</text>`+"\n", x, x, padT, plotH-padB, x+4, padT+14, esc("scale "+r.ScaleLabels[k]))
	}
	return c.done()
}
