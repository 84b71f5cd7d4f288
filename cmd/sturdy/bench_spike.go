package main

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim"
)

// sturdy bench overload -spike: the metastable-failure experiment. The
// offered load is 0.8×C, rises to a spike of several times C for a few
// seconds, then falls back to 0.8×C. mongosim's limiter charges every
// rejection a fraction of an admitted request's capacity (RejectCost), as
// a real server pays for the requests it turns away, so clients that keep
// retrying can hold the server in overload after the spike has passed. The
// question is how long each client takes to get back to the offered load.

// spikeProfile is the offered load over time, in multiples of C.
type spikeProfile struct {
	Base, Spike         float64
	Before, For, After  time.Duration
	Capacity            int
	Bucket              time.Duration // goodput resolution
	OpTimeout           time.Duration
	RecoveredAt, Window float64 // recovered: goodput over Window seconds ≥ RecoveredAt × base load
}

func (p spikeProfile) total() time.Duration { return p.Before + p.For + p.After }

// rate is the offered load (requests per second) at t.
func (p spikeProfile) rate(t time.Duration) float64 {
	if t >= p.Before && t < p.Before+p.For {
		return p.Spike * float64(p.Capacity)
	}
	return p.Base * float64(p.Capacity)
}

// spikeResult is one client's row of the spike report, text and JSON alike.
type spikeResult struct {
	Client             string    `json:"client"`
	RecoveryS          float64   `json:"recovery_s"` // -1: not recovered by the end of the run
	Amplification      float64   `json:"amplification"`
	GoodputDuringSpike float64   `json:"goodput_during_spike"` // successes per second during the spike
	GoodputAfter       float64   `json:"goodput_after"`        // successes per second after the spike
	Offered            int64     `json:"offered"`
	Succeeded          int64     `json:"succeeded"`
	Failed             int64     `json:"failed"`
	Attempts           int64     `json:"attempts"`
	Goodput            []float64 `json:"goodput"` // successes per second, per bucket
}

func runSpike(ctx context.Context, sim *mongosim.Cluster, clients []string, p spikeProfile, rejectCost float64, stdout, stderr io.Writer, jsonOut, htmlOut string) error {
	fmt.Fprintf(stderr, "spike: C=%d req/s, offered %.1f×C for %v, %.0f×C for %v, %.1f×C for %v; each rejection costs %.2f of a request\n",
		p.Capacity, p.Base, p.Before, p.Spike, p.For, p.Base, p.After, rejectCost)
	limiter := mongosim.LimiterOptions{RequestsPerSecond: float64(p.Capacity), Burst: max(1, p.Capacity/20), RejectCost: rejectCost}
	var results []spikeResult
	for _, name := range clients {
		fmt.Fprintf(stderr, "spike: %s\n", name)
		sim.SetLimiter(mongosim.LimiterOptions{})
		var attempts atomic.Int64
		c, err := newBenchClient(ctx, name, sim.URI(), &attempts)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sim.SetLimiter(limiter)
		res := offerProfile(ctx, c, p)
		c.close(ctx)
		res.Client, res.Attempts = name, attempts.Load()
		if res.Offered > 0 {
			res.Amplification = float64(res.Attempts) / float64(res.Offered)
		}
		results = append(results, res)
	}
	sim.SetLimiter(mongosim.LimiterOptions{})
	printSpikeTable(stdout, results, p)
	if err := writeJSON(jsonOut, results); err != nil {
		return err
	}
	return writeHTMLFile(htmlOut, func(w io.Writer) error { return writeSpikeHTML(w, results, p) })
}

// offerProfile runs the profile open loop: requests start on schedule
// whether or not earlier ones have finished, as users' requests do.
func offerProfile(ctx context.Context, c benchClient, p spikeProfile) spikeResult {
	var (
		res       spikeResult
		wg        sync.WaitGroup
		succeeded atomic.Int64
		failed    atomic.Int64
	)
	nb := int(p.total() / p.Bucket)
	buckets := make([]atomic.Int64, nb+1)
	inflight := make(chan struct{}, 8192)
	start := time.Now()
	next := time.Duration(0)
	for i := 0; next < p.total() && ctx.Err() == nil; i++ {
		if wait := time.Until(start.Add(next)); wait > 0 {
			time.Sleep(wait)
		}
		res.Offered++
		next += time.Duration(float64(time.Second) / p.rate(next))
		select {
		case inflight <- struct{}{}:
		default:
			failed.Add(1) // the client is saturated: the request never starts
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-inflight }()
			opCtx, cancel := context.WithTimeout(ctx, p.OpTimeout)
			defer cancel()
			if err := c.insert(opCtx, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "i", Value: int32(i)}}); err != nil {
				failed.Add(1)
				return
			}
			succeeded.Add(1)
			if b := int(time.Since(start) / p.Bucket); b < len(buckets) {
				buckets[b].Add(1)
			}
		}(i)
	}
	wg.Wait()
	res.Succeeded, res.Failed = succeeded.Load(), failed.Load()
	perSec := float64(time.Second) / float64(p.Bucket)
	for i := 0; i < nb; i++ {
		res.Goodput = append(res.Goodput, float64(buckets[i].Load())*perSec)
	}
	res.GoodputDuringSpike = meanRate(res.Goodput, p.Before, p.Before+p.For, p)
	res.GoodputAfter = meanRate(res.Goodput, p.Before+p.For, p.total(), p)
	res.RecoveryS = recoveryTime(res.Goodput, p)
	return res
}

func meanRate(goodput []float64, from, to time.Duration, p spikeProfile) float64 {
	i, j := int(from/p.Bucket), min(int(to/p.Bucket), len(goodput))
	if j <= i {
		return 0
	}
	sum := 0.0
	for _, g := range goodput[i:j] {
		sum += g
	}
	return sum / float64(j-i)
}

// recoveryTime is the time from the end of the spike to the start of the
// first window of p.Window seconds whose goodput reaches p.RecoveredAt of
// the base load; -1 if there is none before the run ends.
func recoveryTime(goodput []float64, p spikeProfile) float64 {
	end := int((p.Before + p.For) / p.Bucket)
	w := max(1, int(p.Window*float64(time.Second)/float64(p.Bucket)))
	target := p.RecoveredAt * p.Base * float64(p.Capacity)
	for i := end; i+w <= len(goodput); i++ {
		sum := 0.0
		for _, g := range goodput[i : i+w] {
			sum += g
		}
		if sum/float64(w) >= target {
			return float64(i-end) * p.Bucket.Seconds()
		}
	}
	return -1
}

func printSpikeTable(w io.Writer, results []spikeResult, p spikeProfile) {
	fmt.Fprintf(w, "offered %.1f×C, a spike to %.0f×C for %v, then %.1f×C for %v (C = %d req/s); recovery = end of the spike until a %.0fs window reaches %.0f%% of the offered load\n\n",
		p.Base, p.Spike, p.For, p.Base, p.After, p.Capacity, p.Window, 100*p.RecoveredAt)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\trecovery\tgoodput before\tduring spike\tafter spike\tattempts/request\tfailed\t")
	for _, r := range results {
		rec := fmt.Sprintf("%.1fs", r.RecoveryS)
		if r.RecoveryS < 0 {
			rec = fmt.Sprintf("not in %v", p.After)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f/s\t%.0f/s\t%.0f/s\t%.2f\t%d\t\n", r.Client, rec, meanRate(r.Goodput, 0, p.Before, p),
			r.GoodputDuringSpike, r.GoodputAfter, r.Amplification, r.Failed)
	}
	tw.Flush()
}

type spikePage struct {
	Desc   string
	Rows   []spikeResult
	Charts []chart
	Style  template.CSS
}

var spikeTemplate = template.Must(template.New("spike").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sturdy bench overload -spike: goodput through an overload spike</title>
<style>{{.Style}}</style></head><body>
<h1>Goodput through an overload spike</h1><p>{{.Desc}}</p>
<table id="clients"><tr><th>client</th><th>recovery (s)</th><th>goodput during spike (/s)</th><th>goodput after (/s)</th><th>attempts per request</th><th>failed</th></tr>
{{range .Rows}}<tr><td>{{.Client}}</td><td>{{if lt .RecoveryS 0.0}}not recovered{{else}}{{printf "%.1f" .RecoveryS}}{{end}}</td><td>{{printf "%.0f" .GoodputDuringSpike}}</td><td>{{printf "%.0f" .GoodputAfter}}</td><td>{{printf "%.2f" .Amplification}}</td><td>{{.Failed}}</td></tr>
{{end}}</table>
{{range .Charts}}<h2>{{.Title}}</h2>
{{.SVG}}
{{end}}
</body></html>
`))

func writeSpikeHTML(w io.Writer, results []spikeResult, p spikeProfile) error {
	page := spikePage{Rows: results, Style: template.CSS(pageStyle),
		Desc: fmt.Sprintf("Offered %.1f×C, %.0f×C during the spike (C = %d requests/s), every rejection costing the server capacity. "+
			"Recovery: from the end of the spike until a %.0f s window reaches %.0f%% of the offered load.",
			p.Base, p.Spike, p.Capacity, p.Window, 100*p.RecoveredAt)}
	spike := chartBand{From: p.Before.Seconds(), To: (p.Before + p.For).Seconds(), Kind: "spike", Color: "#d9534f22",
		Title: fmt.Sprintf("offered %.0f×C", p.Spike)}
	for _, r := range results {
		g := chartSeries{Name: "successful requests per second", Color: "#337ab7"}
		for i, v := range r.Goodput {
			g.Points = append(g.Points, chartPoint{(float64(i) + 0.5) * p.Bucket.Seconds(), v})
		}
		rec := fmt.Sprintf("recovery %.1f s", r.RecoveryS)
		if r.RecoveryS < 0 {
			rec = "no recovery before the run ended"
		}
		page.Charts = append(page.Charts, chart{Title: r.Client + ": " + rec, XLabel: "time (s)", YLabel: "requests per second",
			Series: []chartSeries{g}, Bands: []chartBand{spike}, XMax: p.total().Seconds(), YMax: 1.2 * float64(p.Capacity),
			Refs: []chartRef{{Y: float64(p.Capacity), Label: "capacity C", Color: "#999"},
				{Y: p.Base * float64(p.Capacity), Label: "offered load outside the spike", Color: "#5cb85c"}}})
	}
	return spikeTemplate.Execute(w, page)
}
