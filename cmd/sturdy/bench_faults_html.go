package main

import (
	"fmt"
	"html/template"
	"io"
	"time"
)

// The page of `sturdy bench faults --html`: per client, failures per
// injected fault and goodput side by side, then each client's run second by
// second, successes and failures against the faults injected, and p99
// latency.

// faultsRun describes the run for the page's heading.
type faultsRun struct {
	Fault      string
	Rate       float64
	Duration   time.Duration
	Goroutines int
	Options    string
}

type faultsPage struct {
	Run     faultsRun
	Rows    []faultsRow
	Summary []chart
	Charts  []chart
	Style   template.CSS
}

type faultsRow struct {
	faultsResult
	Check string
}

var faultsTemplate = template.Must(template.New("faults").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy bench faults: failures per injected fault</title>
<style>{{.Style}}</style></head><body>
<h1>Failures per injected fault: {{.Run.Fault}} on {{.Run.Rate}} of writes</h1>
<p>Each client ran the same closed-loop <code>$inc</code> upserts from {{.Run.Goroutines}} goroutines for {{.Run.Duration}};
{{.Run.Options}}. Failures per fault: failed operations per fail point activation. Applied: the counters' sum,
checked against the operations that succeeded.</p>
<table id="clients"><tr><th>client</th><th>ops</th><th>failures</th><th>faults</th><th>failures per fault</th><th>goodput (/s)</th><th>p50 (ms)</th><th>p99 (ms)</th><th>applied</th></tr>
{{range .Rows}}<tr class="{{if eq .Check "ok"}}good{{else}}bad{{end}}"><td>{{.Client}}</td><td>{{.Ops}}</td><td>{{.Failures}}</td><td>{{.Faults}}</td><td>{{printf "%.3f" .FailuresPerFault}}</td><td>{{printf "%.0f" .OpsPerS}}</td><td>{{printf "%.1f" .P50ms}}</td><td>{{printf "%.1f" .P99ms}}</td><td>{{.Applied}} ({{.Check}})</td></tr>
{{end}}</table>
{{range .Summary}}<h2>{{.Title}}</h2>
{{.SVG}}
{{end}}{{range .Charts}}<h2>{{.Title}}</h2>
{{.SVG}}
{{end}}
</body></html>
`))

func writeFaultsHTML(w io.Writer, results []faultsResult, run faultsRun) error {
	page := faultsPage{Run: run, Style: template.CSS(pageStyle)}
	perFault := chart{Title: "Failures per injected fault (lower is better)", XLabel: "client", YLabel: "failures per fault"}
	goodput := chart{Title: "Goodput (higher is better)", XLabel: "client", YLabel: "operations per second"}
	fpf := chartSeries{Name: "failures per fault", Color: "#d9534f", Bars: true}
	gp := chartSeries{Name: "goodput", Color: "#5cb85c", Bars: true}
	for i, r := range results {
		page.Rows = append(page.Rows, faultsRow{faultsResult: r, Check: r.appliedCheck()})
		perFault.Categories = append(perFault.Categories, r.Client)
		goodput.Categories = append(goodput.Categories, r.Client)
		fpf.Points = append(fpf.Points, chartPoint{float64(i), r.FailuresPerFault})
		gp.Points = append(gp.Points, chartPoint{float64(i), r.OpsPerS})
		ok := chartSeries{Name: "succeeded", Color: "#5cb85c", Bars: true}
		failed := chartSeries{Name: "failed", Color: "#d9534f", Bars: true}
		faults := chartSeries{Name: "faults injected", Color: "#8e44ad"}
		lat := chartSeries{Name: "p99 latency", Color: "#337ab7"}
		for s, sec := range r.Timeline {
			x := float64(s)
			ok.Points = append(ok.Points, chartPoint{x, float64(sec.Succeeded)})
			failed.Points = append(failed.Points, chartPoint{x, float64(sec.Failed)})
			faults.Points = append(faults.Points, chartPoint{x + 0.5, float64(sec.Faults)})
			lat.Points = append(lat.Points, chartPoint{x + 0.5, sec.P99ms})
		}
		xMax := run.Duration.Seconds()
		page.Charts = append(page.Charts,
			chart{Title: fmt.Sprintf("%s: operations and injected faults per second", r.Client), XLabel: "time (s)",
				YLabel: "per second", Series: []chartSeries{ok, failed, faults}, XMax: xMax},
			chart{Title: fmt.Sprintf("%s: p99 latency per second", r.Client), XLabel: "time (s)",
				YLabel: "p99 latency (ms)", Series: []chartSeries{lat}, XMax: xMax})
	}
	perFault.Series, goodput.Series = []chartSeries{fpf}, []chartSeries{gp}
	page.Summary = []chart{perFault, goodput}
	return faultsTemplate.Execute(w, page)
}
