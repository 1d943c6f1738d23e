package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// SVG draws every contender's throughput ratio against the baseline: a bar
// to the median, a whisker over the runs' range, a line at the baseline
// (1×) and a dashed line at the dialect's target.
func (r *Report) SVG() string {
	rows := r.chartRows()
	const (
		labelW = 330
		plotW  = 460
		rowH   = 20
		headH  = 28
		pad    = 12
	)
	xmax := 2.0
	for _, row := range rows {
		if !math.IsNaN(row.ratio.Max) {
			xmax = math.Max(xmax, row.ratio.Max)
		}
	}
	xmax = math.Min(math.Ceil(xmax*2)/2, 4)
	x := func(v float64) float64 { return labelW + math.Min(v, xmax)/xmax*plotW }

	var b strings.Builder
	height := pad + 30
	for i, row := range rows {
		if i == 0 || rows[i-1].db != row.db {
			height += headH
		}
		height += rowH
	}
	height += 40
	width := labelW + plotW + 90
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold">Throughput as a multiple of hand-written SQL on its own lean schema (median of runs, whisker: min–max)</text>`+"\n", pad, pad+14)
	y := pad + 30
	colors := map[string]string{"jobs": "#2b6cb0", "river": "#c05621", "sql-tx": "#718096"}
	top := y
	for i, row := range rows {
		if i == 0 || rows[i-1].db != row.db {
			if i > 0 {
				r.svgLines(&b, x, rows[i-1].db, top, y)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", pad, y+18, html.EscapeString(row.db.Title()))
			y += headH
			top = y
		}
		color := colors[row.contender]
		if color == "" {
			color = "#718096"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s · %s</text>`+"\n", pad, y+14, html.EscapeString(row.label), row.contender)
		if !math.IsNaN(row.ratio.Median) {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.8"/>`+"\n",
				labelW, y+4, x(row.ratio.Median)-labelW, rowH-8, color)
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", x(row.ratio.Min), x(row.ratio.Max), y+rowH/2, y+rowH/2)
			for _, v := range []float64{row.ratio.Min, row.ratio.Max} {
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", x(v), x(v), y+6, y+rowH-6)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2f×</text>`+"\n", x(math.Max(row.ratio.Max, row.ratio.Median))+6, y+14, row.ratio.Median)
		}
		y += rowH
	}
	if len(rows) > 0 {
		r.svgLines(&b, x, rows[len(rows)-1].db, top, y)
	}
	// Axis.
	for v := 0.0; v <= xmax+1e-9; v += 0.5 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#a0aec0"/>`+"\n", x(v), x(v), y, y+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#4a5568">%.1f×</text>`+"\n", x(v), y+16, v)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#4a5568">solid line: baseline (1×) · dashed: target (0.90× PostgreSQL, 0.85× SQLite for Submit)</text>`+"\n", labelW, y+32)
	b.WriteString("</svg>\n")
	return b.String()
}

func (r *Report) svgLines(b *strings.Builder, x func(float64) float64, db DB, top, bottom int) {
	target := 0.90
	if db.Dialect == "sqlite" {
		target = 0.85
	}
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#2d3748" stroke-width="1.5"/>`+"\n", x(1), x(1), top, bottom)
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e53e3e" stroke-dasharray="4 3"/>`+"\n", x(target), x(target), top, bottom)
}
