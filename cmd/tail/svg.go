package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// chart is a horizontal grouped bar chart: one group of bars per row, one
// bar per series in each, its value written after it.
type chart struct {
	title  string
	unit   string   // after each value ("ms", "%")
	log    bool     // a logarithmic scale (latencies that span 1 ms to 200 ms)
	series []string // the legend, one bar of each group per series
	groups []group
}

type group struct {
	label  string
	values []float64 // one per series; NaN = no bar
}

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"}

const (
	chartWidth = 760
	labelWidth = 190
	barArea    = 480
	barHeight  = 14
	groupGap   = 12
)

// svg draws the chart.
func (c chart) svg() []byte {
	top := 40.0
	groupH := float64(len(c.series)*barHeight + groupGap)
	height := top + float64(len(c.groups))*groupH + 20 + float64(len(c.series))*18
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(c.title))
	scale := c.scale()
	for gi, g := range c.groups {
		y := top + float64(gi)*groupH
		fmt.Fprintf(&b, `<text x="10" y="%.1f">%s</text>`+"\n", y+float64(len(c.series)*barHeight)/2+4, html.EscapeString(g.label))
		for si, v := range g.values {
			if math.IsNaN(v) {
				continue
			}
			by := y + float64(si*barHeight)
			w := scale(v)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n",
				labelWidth, by, w, barHeight-2, palette[si%len(palette)])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s%s</text>`+"\n",
				float64(labelWidth)+w+4, by+barHeight-4, formatValue(v), html.EscapeString(c.unit))
		}
	}
	ly := top + float64(len(c.groups))*groupH + 10
	for si, s := range c.series {
		y := ly + float64(si)*18
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", labelWidth, y, palette[si%len(palette)])
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", labelWidth+18, y+10, html.EscapeString(s))
	}
	if c.log {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="10" fill="#666">logarithmic scale</text>`+"\n", chartWidth-110, ly+10)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// scale maps a value to a bar length in pixels.
func (c chart) scale() func(float64) float64 {
	hi := 0.0
	lo := math.Inf(1)
	for _, g := range c.groups {
		for _, v := range g.values {
			if !math.IsNaN(v) && v > 0 {
				hi, lo = max(hi, v), min(lo, v)
			}
		}
	}
	if hi == 0 {
		return func(float64) float64 { return 0 }
	}
	if !c.log {
		return func(v float64) float64 { return barArea * max(v, 0) / hi }
	}
	// Logarithmic from a decade below the smallest value, so that it still
	// shows as a bar.
	floor := math.Pow(10, math.Floor(math.Log10(lo))-1)
	span := math.Log10(hi / floor)
	return func(v float64) float64 {
		if v <= floor {
			return 0
		}
		return barArea * math.Log10(v/floor) / span
	}
}

// formatValue prints v with three significant digits.
func formatValue(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
