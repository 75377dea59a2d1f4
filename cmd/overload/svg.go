package main

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// panel is one of the chart's stacked plots: a value of each bucket, or
// none (a gap in the line).
type panel struct {
	title string
	unit  string
	value func(bucket) (float64, bool)
	top   float64 // the y axis' top; 0: from the data
}

var lineColors = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// chart draws the runs over time as an SVG: goodput, p99 latency of
// successes and the server's queue depth, one line per client, in panels
// that share the time axis, with the phases marked.
func chart(runs []*run, width time.Duration, deadline time.Duration) string {
	if len(runs) == 0 {
		return ""
	}
	panels := []panel{
		{title: "goodput (successes/s)", unit: "/s", value: func(b bucket) (float64, bool) { return b.goodput, true }},
		{title: "p99 latency of successes (none: no line)", unit: "ms", top: deadline.Seconds() * 1000,
			value: func(b bucket) (float64, bool) { return b.p99.Seconds() * 1000, b.p99 > 0 }},
		{title: "server queue depth (no sample: no line)", value: func(b bucket) (float64, bool) { return b.queue, b.samples > 0 }},
	}
	const (
		w, left, right = 900, 70, 250
		panelH, gap    = 170, 50
		top            = 50
	)
	plotW := float64(w - left - right)
	h := top + len(panels)*(panelH+gap)
	sch := runs[0].sch
	total := sch.total().Seconds()
	px := func(t time.Duration) float64 { return left + t.Seconds()/total*plotW }
	step := tickStep(total)

	lines := make([][]bucket, len(runs))
	for i, r := range runs {
		lines[i] = r.timeline(width)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">Overload: a server of %d workers, callers with a %v deadline, open-loop arrivals</text>`+"\n",
		left, runs[0].k, deadline)
	for pi, p := range panels {
		y0 := float64(top + pi*(panelH+gap) + 20)
		ytop := p.top
		if ytop == 0 {
			for _, bs := range lines {
				for _, bk := range bs {
					v, _ := p.value(bk)
					ytop = max(ytop, v)
				}
			}
			ytop = benchkit.NiceCeil(ytop, 1, 2, 2.5, 5)
		}
		py := func(v float64) float64 { return y0 + panelH - min(v, ytop)/ytop*panelH }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-6, html.EscapeString(p.title))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		for i := 0; i <= 5; i++ {
			v := ytop * float64(i) / 5
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, left+plotW, py(v), py(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s%s</text>`+"\n", left-5, py(v)+4, benchkit.TrimFloat(v, false), p.unit)
		}
		for i := range sch {
			if i > 0 {
				x := px(sch.start(i))
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#666" stroke-dasharray="4 3"/>`+"\n", x, x, y0, y0+panelH)
			}
			if pi == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#666" font-size="11">%s %.0f/s, %v</text>`+"\n",
					px(sch.start(i))+4, top-8, html.EscapeString(sch[i].name), sch[i].rate, sch[i].service)
			}
		}
		for ci, bs := range lines {
			var pts []string
			flush := func() {
				if len(pts) > 0 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", lineColors[ci%len(lineColors)], strings.Join(pts, " "))
				}
				pts = pts[:0]
			}
			for _, bk := range bs {
				v, ok := p.value(bk)
				if !ok {
					flush()
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(bk.t+width/2), py(v)))
			}
			flush()
		}
		for s := 0.0; s <= total; s += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%gs</text>`+"\n", px(time.Duration(s*float64(time.Second))), y0+panelH+15, s)
		}
	}
	for ci, r := range runs {
		y := top + 30 + ci*20
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", w-right+15, w-right+40, y, y, lineColors[ci%len(lineColors)])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", w-right+45, y+4, html.EscapeString(r.client))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// tickStep is the spacing of the time axis' labels: about ten of them.
func tickStep(total float64) float64 { return max(benchkit.NiceCeil(total/10, 1, 2, 2.5, 5), 0.1) }
