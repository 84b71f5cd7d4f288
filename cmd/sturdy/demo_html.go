package main

import (
	"fmt"
	"html/template"
	"io"
)

// The demo's HTML report is one self-contained page: per fault, a chart of
// lost and duplicated increments by retry strategy, then the measured table.

type demoChart struct {
	Desc  string
	Chart chart
}

type demoPageData struct {
	Results []cellResult
	Charts  []demoChart
	Style   template.CSS
}

var demoPage = template.Must(template.New("demo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy demo: lost and duplicated increments by retry strategy</title>
<style>{{.Style}}</style></head><body>
<h1>A counter under injected faults: lost and duplicated increments by retry strategy</h1>
<p>The workload is the daily counter of the article "How To Write Resilient MongoDB Applications": each operation
increments one counter with an upsert. Every fault below was injected at exact points, and each retry strategy
ran the same number of increments. Every increment also set a per-operation field, so lost increments (applied
0 times) and duplicated ones (applied more than once) are counted exactly, not estimated.</p>
{{range .Charts}}<h2>{{.Chart.Title}}</h2><p>{{.Desc}}</p>
{{.Chart.SVG}}
{{end}}
<h2>Measurements</h2>
<table id="measurements"><tr><th>fault</th><th>strategy</th><th>expected</th><th>counted</th><th>lost</th><th>duplicated</th><th>errors</th><th>attempts</th><th>time</th></tr>
{{range .Results}}<tr class="{{if or .Lost .Duplicated}}bad{{else}}good{{end}}"><td>{{.Fault}}</td><td>{{.Strategy}}</td><td>{{.Expected}}</td><td>{{.Counted}}</td><td>{{.Lost}}</td><td>{{.Duplicated}}</td><td>{{.Errors}}</td><td>{{.Attempts}}</td><td>{{printf "%.0f ms" .MS}}</td></tr>
{{end}}</table>
</body></html>
`))

func writeDemoHTML(w io.Writer, results []cellResult) error {
	page := demoPageData{Results: results, Style: template.CSS(pageStyle)}
	for _, f := range demoFaults {
		c := chart{Title: "Fault: " + f.name, XLabel: "retry strategy", YLabel: "increments"}
		lost := chartSeries{Name: "lost", Color: "#d9534f", Bars: true}
		dup := chartSeries{Name: "duplicated", Color: "#f0ad4e", Bars: true}
		for _, r := range results {
			if r.Fault != f.name {
				continue
			}
			x := float64(len(c.Categories))
			c.Categories = append(c.Categories, r.Strategy)
			lost.Points = append(lost.Points, chartPoint{x, float64(r.Lost)})
			dup.Points = append(dup.Points, chartPoint{x, float64(r.Duplicated)})
		}
		if len(c.Categories) == 0 {
			continue
		}
		c.Series = []chartSeries{lost, dup}
		page.Charts = append(page.Charts, demoChart{Desc: f.desc, Chart: c})
	}
	if err := demoPage.Execute(w, page); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return nil
}
