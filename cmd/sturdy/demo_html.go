package main

import (
	"fmt"
	"html/template"
	"io"
)

// The HTML report is one self-contained page: the measured table and, per
// fault, a bar chart of lost and duplicated increments by strategy, drawn
// as inline SVG so it needs no scripts or network.

type htmlBar struct {
	Label                string
	X, DupX, LostY, DupY int
	LostH, DupH          int
	LostTextY, DupTextY  int
	LostVal, DupVal      int
}

type htmlChart struct {
	Fault, Desc string
	Width       int
	Bars        []htmlBar
	MaxLabel    int
}

type htmlPage struct {
	Results []cellResult
	Charts  []htmlChart
}

const (
	chartHeight = 160
	chartBase   = 35 + chartHeight // y of the bars' baseline
	barStep     = 160              // room for a strategy's two bars and its label
)

var demoPage = template.Must(template.New("demo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy demo: lost and duplicated writes</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
td:nth-child(1),td:nth-child(2),th{text-align:left}
.bad{background:#fde2e1}.good{background:#e3f6e3}
.lost{fill:#d9534f}.dup{fill:#f0ad4e}
svg text{font-size:11px}
</style></head><body>
<h1>Seed 001's counter under injected faults</h1>
<p>Each cell ran the same number of increments; every increment also bumped a per-operation field, so lost
(applied 0 times) and duplicated (applied more than once) increments are counted exactly.</p>
{{range .Charts}}<h2>{{.Fault}}</h2><p>{{.Desc}}</p>
<svg width="{{.Width}}" height="{{$.SVGHeight}}" role="img" aria-label="lost and duplicated increments for {{.Fault}}">
<text x="0" y="12"><tspan class="lost">&#9632;</tspan> lost <tspan class="dup">&#9632;</tspan> duplicated (max {{.MaxLabel}})</text>
<line x1="0" x2="{{.Width}}" y1="{{$.Base}}" y2="{{$.Base}}" stroke="#999"/>
{{range .Bars}}<rect class="lost" x="{{.X}}" y="{{.LostY}}" width="30" height="{{.LostH}}"><title>lost {{.LostVal}}</title></rect>
<text x="{{.X}}" y="{{.LostTextY}}">{{.LostVal}}</text>
<rect class="dup" x="{{.DupX}}" y="{{.DupY}}" width="30" height="{{.DupH}}"><title>duplicated {{.DupVal}}</title></rect>
<text x="{{.DupX}}" y="{{.DupTextY}}">{{.DupVal}}</text>
<text x="{{.X}}" y="{{$.Height}}">{{.Label}}</text>
{{end}}</svg>
{{end}}
<h2>Measurements</h2>
<table><tr><th>fault</th><th>strategy</th><th>expected</th><th>counted</th><th>lost</th><th>duplicated</th><th>errors</th><th>attempts</th><th>time</th></tr>
{{range .Results}}<tr class="{{if or .Lost .Duplicated}}bad{{else}}good{{end}}"><td>{{.Fault}}</td><td>{{.Strategy}}</td><td>{{.Expected}}</td><td>{{.Counted}}</td><td>{{.Lost}}</td><td>{{.Duplicated}}</td><td>{{.Errors}}</td><td>{{.Attempts}}</td><td>{{printf "%.0f ms" .MS}}</td></tr>
{{end}}</table>
</body></html>
`))

func writeDemoHTML(w io.Writer, results []cellResult) error {
	page := htmlPage{Results: results}
	for _, f := range demoFaults {
		var cells []cellResult
		maxVal := 1
		for _, r := range results {
			if r.Fault == f.name {
				cells = append(cells, r)
				maxVal = max(maxVal, r.Lost, r.Duplicated)
			}
		}
		if len(cells) == 0 {
			continue
		}
		c := htmlChart{Fault: f.name, Desc: f.desc, Width: 40 + barStep*len(cells), MaxLabel: maxVal}
		for i, r := range cells {
			lh := r.Lost * chartHeight / maxVal
			dh := r.Duplicated * chartHeight / maxVal
			x := 10 + barStep*i
			c.Bars = append(c.Bars, htmlBar{
				Label: r.Strategy, X: x, DupX: x + 34,
				LostY: chartBase - lh, LostH: lh, LostVal: r.Lost, LostTextY: chartBase - lh - 3,
				DupY: chartBase - dh, DupH: dh, DupVal: r.Duplicated, DupTextY: chartBase - dh - 3,
			})
		}
		page.Charts = append(page.Charts, c)
	}
	if err := demoPage.Execute(w, struct {
		htmlPage
		Base, Height, SVGHeight int
	}{page, chartBase, chartBase + 18, chartBase + 24}); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return nil
}
