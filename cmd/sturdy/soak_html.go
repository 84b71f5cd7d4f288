package main

import (
	"fmt"
	"html/template"
	"io"
	"sort"

	"github.com/sturdy-go/sturdy/soak"
)

// The soak's HTML report: the per-operation table, then operations per
// second (succeeded and failed) and p99 latency per second, each over the
// fault episodes, with axes, labelled episodes and step-downs.

// faultColors gives each fault kind one colour on every page.
var faultColors = map[string]string{
	"reply-lost": "#f0ad4e55", "request-lost": "#d9534f33", "reset": "#9b59b655",
	"overload": "#e74c3c44", "slow": "#3498db44", "close-before": "#d9534f33",
	"router-restart": "#7f8c8d55", "commit-lost": "#e67e2255",
}

func faultColor(kind string) string {
	if c, ok := faultColors[kind]; ok {
		return c
	}
	return "#99999944"
}

type soakRow struct {
	Kind string
	soak.KindCount
}

type soakPage struct {
	R           *soak.Report
	Rows        []soakRow
	OpsChart    chart
	LatChart    chart
	Style       template.CSS
	Linearizing string
}

var soakTemplate = template.Must(template.New("soak").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy soak: lost and duplicated writes under faults</title>
<style>{{.Style}}</style></head><body>
<h1>sturdy soak: every write checked under injected faults</h1>
<p>{{.R.Ops}} operations in {{printf "%.1f" .R.Elapsed.Seconds}} s, {{.R.Failed}} failed ({{.R.FailedApplied}} of them applied),
<b>{{.R.Lost}} lost, {{.R.Duplicated}} duplicated, {{.R.Stuck}} stuck</b>; register history: {{.Linearizing}};
{{.R.Faults}} faults in {{len .R.Schedule}} episodes; p50 {{printf "%.2f" .R.P50ms}} ms, p99 {{printf "%.2f" .R.P99ms}} ms.
{{if (index .R.ByKind "transaction").Ops}}<b>{{.R.HalfCommitted}} half-committed transactions</b>{{if .R.CrossShard}}, each across two shards{{end}}.{{end}}
Client: {{.R.Driver}}.</p>
<table id="by-operation"><tr><th>operation</th><th>ops</th><th>failed</th><th>failed, applied</th><th>lost</th><th>duplicated</th></tr>
{{range .Rows}}<tr class="{{if or .Lost .Duplicated}}bad{{else}}good{{end}}"><td>{{.Kind}}</td><td>{{.Ops}}</td><td>{{.Failed}}</td><td>{{.FailedApplied}}</td><td>{{.Lost}}</td><td>{{.Duplicated}}</td></tr>
{{end}}<tr><td>all</td><td>{{.R.Ops}}</td><td>{{.R.Failed}}</td><td>{{.R.FailedApplied}}</td><td>{{.R.Lost}}</td><td>{{.R.Duplicated}}</td></tr>
</table>
<h2>{{.OpsChart.Title}}</h2>
{{.OpsChart.SVG}}
<h2>{{.LatChart.Title}}</h2>
{{.LatChart.SVG}}
<p>Shaded: fault episodes (hover for the rate); black lines: step-downs.</p>
</body></html>
`))

func writeSoakHTML(w io.Writer, r *soak.Report) error {
	p := soakPage{R: r, Style: template.CSS(pageStyle), Linearizing: r.Linearization}
	for k, c := range r.ByKind {
		p.Rows = append(p.Rows, soakRow{Kind: k, KindCount: c})
	}
	sort.Slice(p.Rows, func(i, j int) bool { return p.Rows[i].Kind < p.Rows[j].Kind })
	var bands []chartBand
	var marks []chartMark
	for _, ep := range r.Schedule {
		from, to := ep.At.Seconds(), (ep.At + ep.Duration).Seconds()
		if ep.Kind == "stepdown" {
			marks = append(marks, chartMark{X: from, Label: "step-down"})
			continue
		}
		bands = append(bands, chartBand{From: from, To: to, Kind: ep.Kind, Color: faultColor(ep.Kind),
			Title: fmt.Sprintf("%s from %.1f s for %.1f s (rate %.2f)", ep.Kind, from, ep.Duration.Seconds(), ep.Rate)})
	}
	ok := chartSeries{Name: "succeeded", Color: "#5cb85c", Bars: true}
	failed := chartSeries{Name: "failed", Color: "#d9534f", Bars: true}
	lat := chartSeries{Name: "p99 latency", Color: "#337ab7"}
	for i, s := range r.Timeline {
		x := float64(i)
		ok.Points = append(ok.Points, chartPoint{x, float64(s.Succeeded)})
		failed.Points = append(failed.Points, chartPoint{x, float64(s.Failed)})
		lat.Points = append(lat.Points, chartPoint{x + 0.5, s.P99ms})
	}
	xMax := r.Elapsed.Seconds()
	p.OpsChart = chart{Title: "Operations per second over the fault episodes", XLabel: "time (s)", YLabel: "operations per second",
		Series: []chartSeries{ok, failed}, Bands: bands, Marks: marks, XMax: xMax}
	p.LatChart = chart{Title: "p99 latency per second", XLabel: "time (s)", YLabel: "p99 latency (ms)",
		Series: []chartSeries{lat}, Bands: bands, Marks: marks, XMax: xMax}
	return soakTemplate.Execute(w, p)
}
