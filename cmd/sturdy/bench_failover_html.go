package main

import (
	"fmt"
	"html/template"
	"io"
	"time"
)

// The page of `sturdy bench failover --html`: the summary table, then each
// step-down's unavailability window with the clients side by side.

type failoverRun struct {
	Every, Duration time.Duration
	Sequential      bool
	Fault           string
	Rate            float64
}

type failoverPage struct {
	Run     failoverRun
	How     string
	Results []failoverResult
	Chart   chart
	Style   template.CSS
}

var failoverTemplate = template.Must(template.New("failover").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy bench failover: unavailability per step-down</title>
<style>{{.Style}}</style></head><body>
<h1>Unavailability per step-down</h1>
<p>A step-down every {{.Run.Every}} for {{.Run.Duration}}, {{.How}}{{if .Run.Fault}}, with {{.Run.Fault}} on {{.Run.Rate}} of writes{{end}}.
A step-down's window runs from the step-down to the first success of a write started after it. Every client uses its
default options: no heartbeat or timeout is shortened.</p>
<table id="clients"><tr><th>client</th><th>step-downs</th><th>window p50 (ms)</th><th>p90 (ms)</th><th>max (ms)</th><th>ops</th><th>failed ops</th><th>p99 (ms)</th></tr>
{{range .Results}}<tr class="{{if .FailedOps}}bad{{else}}good{{end}}"><td>{{.Client}}</td><td>{{.StepDowns}}</td><td>{{printf "%.2f" .UnavailableP50ms}}</td><td>{{printf "%.2f" .UnavailableP90ms}}</td><td>{{printf "%.2f" .UnavailableMaxms}}</td><td>{{.Ops}}</td><td>{{.FailedOps}}</td><td>{{printf "%.1f" .P99ms}}</td></tr>
{{end}}</table>
<h2>{{.Chart.Title}}</h2>
{{.Chart.SVG}}
</body></html>
`))

// failoverColors tells the clients apart on the chart.
var failoverColors = []string{"#337ab7", "#f0ad4e", "#5cb85c", "#8e44ad"}

func writeFailoverHTML(w io.Writer, results []failoverResult, run failoverRun) error {
	page := failoverPage{Run: run, Results: results, Style: template.CSS(pageStyle),
		How: "the clients at the same time, against the same step-downs"}
	if run.Sequential {
		page.How = "one client after the other (their step-downs are different ones)"
	}
	c := chart{Title: "Each step-down's window, clients side by side", XLabel: "step-down", YLabel: "unavailable (ms)"}
	n := 0
	for i, r := range results {
		s := chartSeries{Name: r.Client, Color: failoverColors[i%len(failoverColors)], Bars: true}
		for k, ms := range r.Windows {
			s.Points = append(s.Points, chartPoint{float64(k), ms})
		}
		n = max(n, len(r.Windows))
		c.Series = append(c.Series, s)
	}
	for k := range n {
		c.Categories = append(c.Categories, fmt.Sprint(k+1))
	}
	page.Chart = c
	return failoverTemplate.Execute(w, page)
}
