package main

import (
	"fmt"
	"strings"

	"github.com/connactor/connactor/fleet/internal/fleetsim"
)

// chart draws a run's utilisation and shortfall over time as an SVG line
// chart, with a mark at each change of the timeline.
func chart(r fleetsim.Result) string {
	const (
		w, h                   = 720.0, 420.0
		left, right, top, base = 70.0, 690.0, 60.0, 360.0
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="15" font-weight="bold">Fleet budgets: %d members, %d routes, budget %d, simulated</text>`+"\n",
		left, r.Config.Members, r.Config.Routes, r.Config.Budget)
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#555">share of the max-min fair division held (blue) and whole fair shares missing (red), every %s; seed %d</text>`+"\n",
		left, "250ms", r.Config.Seed)
	end := r.Config.Duration.Seconds()
	x := func(sec float64) float64 { return left + (right-left)*sec/end }
	y := func(frac float64) float64 { return base - (base-top)*min(max(frac, 0), 1.1)/1.1 }
	for _, p := range []float64{0, 0.2, 0.4, 0.6, 0.8, 1.0} {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(p), right, y(p))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", left-6, y(p)+4, p*100)
	}
	for s := 0.0; s <= end; s += 60 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`+"\n", x(s), top, x(s), base)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f s</text>`+"\n", x(s), base+18, s)
	}
	for i, c := range r.Changes {
		if c.What == "demand shift" || c.What == "start" {
			continue
		}
		cx := x(c.At.Seconds())
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#999" stroke-dasharray="3,3"/>`+"\n", cx, top, cx, base)
		label := c.What
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" fill="#555" transform="rotate(-90 %.1f %.0f)">%s</text>`+"\n",
			cx-3, base-4-float64(i%2)*0, cx-3, base-4, label)
	}
	line := func(color string, v func(fleetsim.Point) float64) {
		var pts []string
		for _, p := range r.Series {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At.Seconds()), y(v(p))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
	}
	line("#1f77b4", func(p fleetsim.Point) float64 { return p.Util })
	line("#d62728", func(p fleetsim.Point) float64 { return p.Shortfall })
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#555">dashed: faults (demand shifts every minute not drawn); the etcd outage takes every node to its floor, 0 at this size</text>`+"\n", left, base+40)
	b.WriteString("</svg>\n")
	return b.String()
}
