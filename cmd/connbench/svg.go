package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// writeCharts draws each sweep (CPU per request against routes, against
// callers) as an SVG line chart in dir, one file per sweep and server:
// cpu-vs-routes-fasthttp.svg, cpu-vs-callers-fasthttp.svg. The x axis is
// logarithmic; each client is one line.
func (r *report) writeCharts(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range r.sweeps() {
		name := filepath.Join(dir, fmt.Sprintf("cpu-vs-%s-%s.svg", s.name, s.server))
		if err := os.WriteFile(name, []byte(s.svg(r)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var chartColors = map[string]string{
	kindNetHTTP: "#d62728", kindConnactor: "#1f77b4", kindStdPool: "#7f7f7f", kindFasthttp: "#2ca02c", kindRaw: "#9467bd",
}

func (s *sweep) svg(r *report) string {
	const (
		width, height          = 720, 420
		left, right, top, bott = 70, 170, 50, 60
	)
	plotW, plotH := float64(width-left-right), float64(height-top-bott)
	var xs []int
	ymax := 0.0
	for _, pts := range s.points {
		for _, p := range pts {
			if !slices.Contains(xs, p.x) {
				xs = append(xs, p.x)
			}
			ymax = max(ymax, p.cpu)
		}
	}
	slices.Sort(xs)
	if len(xs) == 0 {
		return ""
	}
	step := benchkit.NiceCeil(ymax*1.1/5, 1, 2, 5)
	ytop := math.Ceil(ymax*1.1/step) * step
	lx0, lx1 := math.Log10(float64(xs[0])), math.Log10(float64(xs[len(xs)-1]))
	if lx1 == lx0 {
		lx1 = lx0 + 1
	}
	px := func(x int) float64 { return float64(left) + (math.Log10(float64(x))-lx0)/(lx1-lx0)*plotW }
	py := func(y float64) float64 { return float64(top) + plotH - y/ytop*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	what, detail := "routes", fmt.Sprintf("%d callers, each request to a random route", sweepCallers)
	if s.name == "callers" {
		what, detail = "callers", "one route, min(callers, 16) connections"
	}
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">CPU per request against %s (%s server)</text>`+"\n", left, what, s.server)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s; client process CPU (getrusage), %s</text>`+"\n", left, detail, r.Machine.GoVersion)
	// Grid and axes.
	for y := 0.0; y <= ytop+step/2; y += step {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), float64(left)+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, benchkit.TrimFloat(y, true))
	}
	for _, x := range xs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", px(x), top, px(x), float64(top)+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), float64(top)+plotH+18, thousands(x))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, float64(top)+plotH, float64(left)+plotW, float64(top)+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n", left, top, left, float64(top)+plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s (log scale)</text>`+"\n", float64(left)+plotW/2, height-14, what)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">CPU µs per request</text>`+"\n", float64(top)+plotH/2)
	// One line per client, and the legend.
	for i, kind := range s.clients {
		pts := slices.Clone(s.points[kind])
		slices.SortFunc(pts, func(a, b sweepPoint) int { return a.x - b.x })
		color := chartColors[kind]
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.cpu)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(path, " "))
		for _, p := range pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d %s: %.1f µs</title></circle>`+"\n",
				px(p.x), py(p.cpu), color, clientNames[kind], p.x, what, p.cpu)
		}
		ly := float64(top) + 10 + float64(i)*20
		lo, hi := s.spread(kind)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n",
			float64(left)+plotW+14, ly, float64(left)+plotW+34, ly, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s (%.2fx)</text>`+"\n", float64(left)+plotW+40, ly+4, clientNames[kind], hi/lo)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555" font-size="10">(max/min along the curve)</text>`+"\n",
		float64(left)+plotW+14, float64(top)+10+float64(len(s.clients))*20)
	b.WriteString("</svg>\n")
	return b.String()
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
