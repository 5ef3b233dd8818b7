package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Charts are hand-written SVG: a fixed frame, linear axes, one polyline or
// bar group per policy.

var plotColors = []string{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"}

const (
	plotW, plotH           = 720, 420
	padL, padR, padT, padB = 70, 170, 40, 50
)

type svgChart struct {
	b          strings.Builder
	xmin, xmax float64
	ymin, ymax float64
	logX       bool
}

func newChart(title, xlabel, ylabel string, xmin, xmax, ymin, ymax float64, logX bool) *svgChart {
	c := &svgChart{xmin: xmin, xmax: xmax, ymin: ymin, ymax: ymax, logX: logX}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&c.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&c.b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(title))
	x0, y0, x1, y1 := padL, plotH-padB, plotW-padR, padT
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", x0, y1, x1-x0, y0-y1)
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, esc(xlabel))
	fmt.Fprintf(&c.b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, esc(ylabel))
	for i := 0; i <= 4; i++ {
		v := ymin + (ymax-ymin)*float64(i)/4
		y := c.y(v)
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, x1, y, y, x0-6, y+4, fmtTick(v))
	}
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

func fmtTick(v float64) string {
	if v == math.Trunc(v) {
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
	return float64(plotH-padB) - (v-c.ymin)/(c.ymax-c.ymin)*float64(plotH-padB-padT)
}

func (c *svgChart) legend(i int, name string) {
	y := padT + 10 + 20*i
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", plotW-padR+12, y-9, plotColors[i%len(plotColors)], plotW-padR+32, y, esc(name))
}

func (c *svgChart) line(i int, xs, ys []float64) {
	var pts []string
	for k := range xs {
		if math.IsNaN(ys[k]) {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.x(xs[k]), c.y(ys[k])))
	}
	fmt.Fprintf(&c.b, `<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>`+"\n", plotColors[i%len(plotColors)], strings.Join(pts, " "))
}

func (c *svgChart) done() string { return c.b.String() + "</svg>\n" }

// WritePlots writes ttft-cdf.svg, share.svg and hit-rate.svg into dir.
func (r *Report) WritePlots(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"ttft-cdf.svg": r.ttftCDF(),
		"share.svg":    r.shareChart(),
		"hit-rate.svg": r.hitChart(),
	}
	for name, svg := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
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
	c := newChart(fmt.Sprintf("Per-replica share — %s", r.Workload), "replica", "share of requests", 0, float64(maxN), 0, top, false)
	groupW := float64(plotW-padR-padL) / float64(max(maxN, 1))
	barW := groupW * 0.8 / float64(max(len(r.Policies), 1))
	for i, p := range r.Policies {
		c.legend(i, p.Name)
		for k, s := range p.Share {
			x := float64(padL) + groupW*float64(k) + groupW*0.1 + barW*float64(i)
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, c.y(s), barW, c.y(0)-c.y(s), plotColors[i%len(plotColors)])
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
