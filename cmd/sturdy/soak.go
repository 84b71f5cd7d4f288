package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/sturdy-go/sturdy/internal/soak"
	"github.com/sturdy-go/sturdy/mongosim"
)

// errSoakFailed is returned when the run found lost, duplicated or stuck
// operations, a non-linearizable history or leaked goroutines.
var errSoakFailed = errors.New("the soak found problems (see the table)")

func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sturdy soak", flag.ContinueOnError)
	var o soak.Options
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long the workload runs")
	fs.IntVar(&o.Goroutines, "goroutines", 16, "concurrent goroutines")
	fs.StringVar(&o.Mix, "faults", soak.DefaultMix, "fault mix as kind=weight,... (kinds: reply-lost, request-lost, reset, stepdown, overload, slow), or none")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule, the operation mix and mongosim's fail point draws")
	fs.DurationVar(&o.OpTimeout, "op-timeout", 10*time.Second, "deadline of each operation; one that outlives it is stuck")
	fs.StringVar(&o.URI, "uri", "", "deployment to soak (must allow configureFailPoint and replSetStepDown); default: an embedded mongosim replica set")
	members := fs.Int("members", 3, "members of the embedded mongosim replica set")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	htmlOut := fs.String("html", "", "also write latency and failure timelines against the fault schedule as HTML to this file")
	quiet := fs.Bool("quiet", false, "no live progress line")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if o.Duration <= 0 || o.Goroutines <= 0 || o.OpTimeout <= 0 || *members <= 0 {
		fmt.Fprintln(stderr, "-duration, -goroutines, -op-timeout and -members must be positive")
		return errUsage
	}
	if _, err := soak.ParseMix(o.Mix); err != nil {
		fmt.Fprintf(stderr, "-faults: %v\n", err)
		return errUsage
	}
	o.Seed = *seed
	where := o.URI
	if o.URI == "" {
		sim, err := mongosim.Launch(mongosim.Options{Members: *members, Seed: int64(*seed)})
		if err != nil {
			return err
		}
		defer sim.Close()
		o.URI = sim.URI()
		o.FaultsFired = func() int64 { s := sim.Stats(); return s.FailPointsFired + s.StepDowns }
		where = fmt.Sprintf("an embedded %d-member mongosim", *members)
	}
	fmt.Fprintf(stderr, "soak: %v against %s, %d goroutines, faults %s, seed %d; the client runs with its default options\n",
		o.Duration, where, o.Goroutines, o.Mix, o.Seed)
	if !*quiet {
		o.Progress = func(p soak.Progress) {
			fmt.Fprintf(stderr, "\r%4.0fs  ops %9d  failed %6d  faults %6d  lost %d  goroutines %5d  heap %6.1f MB ",
				p.Elapsed.Seconds(), p.Ops, p.Failed, p.Faults, p.Lost, p.Goroutines, p.HeapMB)
		}
	}
	rep, err := soak.Run(ctx, o)
	if !*quiet {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return err
	}
	printSoakReport(stdout, rep)
	if err := writeJSON(*jsonOut, rep); err != nil {
		return err
	}
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err != nil {
			return err
		}
		if err := writeSoakHTML(f, rep); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if !rep.OK() {
		return errSoakFailed
	}
	return nil
}

func printSoakReport(w io.Writer, r *soak.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tops\tfailed\tfailed, applied\tlost\tduplicated\t")
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		c := r.ByKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", k, c.Ops, c.Failed, c.FailedApplied, c.Lost, c.Duplicated)
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%d\t\n", r.Ops, r.Failed, r.FailedApplied, r.Lost, r.Duplicated)
	tw.Flush()
	fmt.Fprintf(w, "\n%d ops in %.1fs (%.0f/s), %d faults injected over %d episodes; p50 %.2f ms, p99 %.2f ms\n",
		r.Ops, r.Elapsed.Seconds(), float64(r.Ops)/r.Elapsed.Seconds(), r.Faults, len(r.Schedule), r.P50ms, r.P99ms)
	fmt.Fprintf(w, "stuck %d, linearizable registers: %s, failures reported not-applied that applied: %d, heap max %.1f MB, client goroutines left after Disconnect: %d\n",
		r.Stuck, r.Linearization, r.Misreport, r.HeapMaxMB, r.LeakedGoroutines)
	if len(r.Errors) > 0 {
		fmt.Fprintln(w, "\nfailures by error:")
		type kv struct {
			k string
			n int64
		}
		var es []kv
		for k, n := range r.Errors {
			es = append(es, kv{k, n})
		}
		sort.Slice(es, func(i, j int) bool { return es[i].n > es[j].n || es[i].n == es[j].n && es[i].k < es[j].k })
		for i, e := range es {
			if i == 10 {
				fmt.Fprintf(w, "  … %d more kinds\n", len(es)-10)
				break
			}
			fmt.Fprintf(w, "  %7d  %s\n", e.n, e.k)
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "\nOK: nothing lost, nothing applied twice, nothing stuck.")
	}
}

// The HTML report: goodput and failures per second, and p99 latency per
// second, drawn as inline SVG over shaded fault episodes.

type soakBar struct {
	X, Y, H, FY, FH int
	Title           string
}

type soakBand struct {
	X, W  int
	Class string
	Title string
}

type soakPage struct {
	R               *soak.Report
	Width, Height   int
	Bars            []soakBar
	Bands           []soakBand
	LatPoints       string
	MaxOps, MaxP99  string
	Kinds           []string
	Counts          map[string]soak.KindCount
	LinearizableTxt string
}

const soakChartH = 200

var soakTemplate = template.Must(template.New("soak").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy soak</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
.ok{fill:#5cb85c}.fail{fill:#d9534f}.lat{fill:none;stroke:#337ab7;stroke-width:1.5}
.reply-lost{fill:#f0ad4e33}.request-lost{fill:#d9534f22}.reset{fill:#9b59b633}.stepdown{fill:#000}
.overload{fill:#e74c3c44}.slow{fill:#3498db33}svg text{font-size:11px}
</style></head><body>
<h1>sturdy soak</h1>
<p>{{.R.Ops}} operations, {{.R.Failed}} failed ({{.R.FailedApplied}} of them applied), <b>{{.R.Lost}} lost, {{.R.Duplicated}} duplicated,
{{.R.Stuck}} stuck</b>; register history {{.LinearizableTxt}}; {{.R.Faults}} faults in {{len .R.Schedule}} episodes; p99 {{printf "%.2f" .R.P99ms}} ms.</p>
<table><tr><th>operation</th><th>ops</th><th>failed</th><th>failed, applied</th><th>lost</th><th>duplicated</th></tr>
{{range .Kinds}}{{with index $.Counts .}}<tr><td>{{$}}</td><td>{{.Ops}}</td><td>{{.Failed}}</td><td>{{.FailedApplied}}</td><td>{{.Lost}}</td><td>{{.Duplicated}}</td></tr>{{end}}{{end}}
</table>
<h2>Operations per second (green: succeeded, red: failed) over the fault episodes</h2>
<svg width="{{.Width}}" height="{{.Height}}" role="img" aria-label="operations per second">
{{range .Bands}}<rect class="{{.Class}}" x="{{.X}}" y="0" width="{{.W}}" height="{{$.Height}}"><title>{{.Title}}</title></rect>{{end}}
{{range .Bars}}<rect class="ok" x="{{.X}}" y="{{.Y}}" width="3" height="{{.H}}"><title>{{.Title}}</title></rect><rect class="fail" x="{{.X}}" y="{{.FY}}" width="3" height="{{.FH}}"/>{{end}}
<text x="2" y="12">max {{.MaxOps}}/s</text></svg>
<h2>p99 latency per second</h2>
<svg width="{{.Width}}" height="{{.Height}}" role="img" aria-label="p99 latency">
{{range .Bands}}<rect class="{{.Class}}" x="{{.X}}" y="0" width="{{.W}}" height="{{$.Height}}"><title>{{.Title}}</title></rect>{{end}}
<polyline class="lat" points="{{.LatPoints}}"/><text x="2" y="12">max {{.MaxP99}} ms</text></svg>
<p>Bands: <span style="background:#f0ad4e33">reply-lost</span> <span style="background:#d9534f22">request-lost</span>
<span style="background:#9b59b633">reset</span> <span style="background:#e74c3c44">overload</span> <span style="background:#3498db33">slow</span>; black lines are step-downs.</p>
</body></html>
`))

func writeSoakHTML(w io.Writer, r *soak.Report) error {
	const pxPerSec = 4
	secs := max(len(r.Timeline), int(r.Elapsed/time.Second)+1)
	p := soakPage{R: r, Width: secs*pxPerSec + 10, Height: soakChartH, Counts: r.ByKind, LinearizableTxt: r.Linearization}
	for k := range r.ByKind {
		p.Kinds = append(p.Kinds, k)
	}
	sort.Strings(p.Kinds)
	var maxOps int64 = 1
	maxP99 := 1.0
	for _, s := range r.Timeline {
		maxOps = max(maxOps, s.Succeeded+s.Failed)
		maxP99 = max(maxP99, s.P99ms)
	}
	p.MaxOps, p.MaxP99 = fmt.Sprint(maxOps), fmt.Sprintf("%.1f", maxP99)
	for i, s := range r.Timeline {
		h := int(float64(s.Succeeded) / float64(maxOps) * (soakChartH - 20))
		fh := int(float64(s.Failed) / float64(maxOps) * (soakChartH - 20))
		if s.Failed > 0 && fh == 0 {
			fh = 1
		}
		p.Bars = append(p.Bars, soakBar{X: i * pxPerSec, Y: soakChartH - h, H: h, FY: soakChartH - h - fh, FH: fh,
			Title: fmt.Sprintf("second %d: %d succeeded, %d failed", i, s.Succeeded, s.Failed)})
		y := soakChartH - int(s.P99ms/maxP99*(soakChartH-20))
		p.LatPoints += fmt.Sprintf("%d,%d ", i*pxPerSec+1, y)
	}
	for _, ep := range r.Schedule {
		x := int(ep.At.Seconds() * pxPerSec)
		wd := max(1, int(ep.Duration.Seconds()*pxPerSec))
		p.Bands = append(p.Bands, soakBand{X: x, W: wd, Class: ep.Kind,
			Title: fmt.Sprintf("%s at %.1fs for %.1fs (rate %.2f)", ep.Kind, ep.At.Seconds(), ep.Duration.Seconds(), ep.Rate)})
	}
	return soakTemplate.Execute(w, p)
}
