package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/sturdy-go/sturdy/soak"
)

// Every page the tools write, rendered from a fixed report and read as a
// reader sees it: the table cells' text, the charts with their axes and
// legends, and nothing a template or Go's %v leaked into the page.

// page is a parsed HTML page.
type page struct{ root *html.Node }

func parsePage(t *testing.T, b []byte) page {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing the page: %v", err)
	}
	return page{root}
}

func (p page) all(match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(p.root)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

func element(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == name }
}

func withClass(name, class string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		return n.Type == html.ElementNode && n.Data == name && strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
	}
}

// rows returns the text of each cell of the table with the given id, row by
// row, header included.
func (p page) rows(t *testing.T, id string) [][]string {
	t.Helper()
	tables := p.all(func(n *html.Node) bool { return element("table")(n) && attr(n, "id") == id })
	if len(tables) != 1 {
		t.Fatalf("want one table #%s, found %d", id, len(tables))
	}
	var out [][]string
	for _, tr := range (page{tables[0]}).all(element("tr")) {
		var row []string
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
				row = append(row, text(c))
			}
		}
		out = append(out, row)
	}
	return out
}

// leaked matches what must never reach a reader: a template action, Go's
// %v of a pointer, struct or map, or a printf error.
var leaked = regexp.MustCompile(`\{\{|\}\}|0x[0-9a-f]{6,}|map\[|&\{|%!|<nil>`)

// checkPage asserts what every page must have: no leaked values anywhere in
// its text or attributes, and each chart with both axes carrying values,
// their labels and a legend.
func checkPage(t *testing.T, p page, wantCharts int) {
	t.Helper()
	for _, n := range p.all(func(n *html.Node) bool { return n.Type == html.TextNode }) {
		if leaked.MatchString(n.Data) {
			t.Errorf("the page shows %q", n.Data)
		}
	}
	for _, cell := range p.all(func(n *html.Node) bool { return element("td")(n) || element("th")(n) }) {
		if s := text(cell); len(s) > 100 {
			t.Errorf("a table cell of %d characters: %.80q…", len(s), s)
		}
	}
	charts := p.all(withClass("svg", "chart"))
	if len(charts) != wantCharts {
		t.Fatalf("want %d charts, found %d", wantCharts, len(charts))
	}
	for i, c := range charts {
		cp := page{c}
		if attr(c, "viewBox") == "" || attr(c, "aria-label") == "" {
			t.Errorf("chart %d: no viewBox or aria-label", i)
		}
		for _, axis := range []string{"x-axis", "y-axis"} {
			g := cp.all(withClass("g", axis))
			if len(g) != 1 {
				t.Fatalf("chart %d: no %s", i, axis)
			}
			ticks := (page{g[0]}).all(withClass("text", "tick"))
			if min := map[string]int{"x-axis": 1, "y-axis": 2}[axis]; len(ticks) < min {
				t.Errorf("chart %d: %s has %d values", i, axis, len(ticks))
			}
			if labels := (page{g[0]}).all(withClass("text", "axis-label")); len(labels) != 1 || text(labels[0]) == "" {
				t.Errorf("chart %d: %s has no label", i, axis)
			}
		}
		if len(cp.all(withClass("text", "legend"))) == 0 {
			t.Errorf("chart %d has no legend", i)
		}
		if len(cp.all(withClass("rect", "bar")))+len(cp.all(withClass("polyline", "line"))) == 0 {
			t.Errorf("chart %d draws no data", i)
		}
	}
}

func legendOf(c *html.Node) []string {
	var out []string
	for _, n := range (page{c}).all(withClass("text", "legend")) {
		out = append(out, text(n))
	}
	return out
}

func fixedSoakReport() *soak.Report {
	r := &soak.Report{Ops: 1214, Succeeded: 1200, Failed: 14, FailedApplied: 3, Faults: 20, P50ms: 1.5, P99ms: 42.25,
		Linearization: "ok", Linearizable: true, Elapsed: 4 * time.Second,
		ByKind: map[string]soak.KindCount{
			"insert": {Ops: 600, Failed: 4, FailedApplied: 1},
			"inc":    {Ops: 614, Failed: 10, FailedApplied: 2},
		},
		Schedule: []soak.Episode{
			{At: 500 * time.Millisecond, Duration: 2 * time.Second, Kind: "reply-lost", Rate: 0.2},
			{At: 3 * time.Second, Kind: "stepdown"},
		},
	}
	for i := range 4 {
		r.Timeline = append(r.Timeline, soak.Second{Succeeded: int64(300 - i), Failed: int64(i), P99ms: float64(10 * (i + 1))})
	}
	return r
}

func TestSoakPageAsAReaderSeesIt(t *testing.T) {
	var b bytes.Buffer
	if err := writeSoakHTML(&b, fixedSoakReport()); err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b.Bytes())
	checkPage(t, p, 2)
	want := [][]string{
		{"operation", "ops", "failed", "failed, applied", "lost", "duplicated"},
		{"inc", "614", "10", "2", "0", "0"},
		{"insert", "600", "4", "1", "0", "0"},
		{"all", "1214", "14", "3", "0", "0"},
	}
	if got := p.rows(t, "by-operation"); !equalRows(got, want) {
		t.Errorf("per-operation table:\n got %q\nwant %q", got, want)
	}
	charts := p.all(withClass("svg", "chart"))
	if l := strings.Join(legendOf(charts[0]), "|"); l != "succeeded|failed|reply-lost|step-down" {
		t.Errorf("operations chart legend: %s", l)
	}
	// The 2-second episode is wide enough to carry its name.
	if labels := (page{charts[0]}).all(withClass("text", "band-label")); len(labels) != 1 || text(labels[0]) != "reply-lost" {
		t.Errorf("episode labels: %d", len(labels))
	}
	if marks := (page{charts[1]}).all(withClass("line", "mark")); len(marks) != 1 {
		t.Errorf("latency chart: %d step-down marks, want 1", len(marks))
	}
	if bars := (page{charts[0]}).all(withClass("rect", "bar")); len(bars) != 8 {
		t.Errorf("operations chart: %d bars, want 8 (succeeded and failed for 4 seconds)", len(bars))
	}
}

func fixedDemoResults() []cellResult {
	return []cellResult{
		{Fault: demoFaults[0].name, Strategy: "no retry", Expected: 100, Counted: 90, Lost: 10, Errors: 10, Attempts: 100, Seconds: 0.25},
		{Fault: demoFaults[0].name, Strategy: "always retry", Expected: 100, Counted: 105, Duplicated: 5, Attempts: 120, Seconds: 0.5},
		{Fault: demoFaults[1].name, Strategy: "retry once", Expected: 100, Counted: 100, Attempts: 101, Seconds: 1},
	}
}

func TestDemoPageAsAReaderSeesIt(t *testing.T) {
	var b bytes.Buffer
	if err := writeDemoHTML(&b, fixedDemoResults()); err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b.Bytes())
	checkPage(t, p, 2)
	if title := text(p.all(element("h1"))[0]); strings.Contains(strings.ToLower(title), "seed") || !strings.Contains(title, "retry strategy") {
		t.Errorf("title %q", title)
	}
	rows := p.rows(t, "measurements")
	if len(rows) != 4 || !equalRows(rows[1:2], [][]string{{demoFaults[0].name, "no retry", "100", "90", "10", "0", "10", "100", "250 ms"}}) {
		t.Errorf("measurements: %q", rows)
	}
	first := p.all(withClass("svg", "chart"))[0]
	var values []string
	for _, n := range (page{first}).all(withClass("text", "value")) {
		values = append(values, text(n))
	}
	if got := strings.Join(values, ","); got != "10,0,0,5" {
		t.Errorf("bar values of the first fault: %s (want lost, duplicated per strategy: 10,0,0,5)", got)
	}
}

func fixedSpike() ([]spikeResult, spikeProfile) {
	p := spikeProfile{Base: 0.8, Spike: 4, Before: 2 * time.Second, For: time.Second, After: 3 * time.Second, Capacity: 200,
		Bucket: 500 * time.Millisecond, RecoveredAt: 0.9, Window: 1}
	results := []spikeResult{
		{Client: "sturdy", RecoveryS: 0.5, GoodputDuringSpike: 190, GoodputAfter: 160, Amplification: 1.2, Failed: 3,
			Goodput: []float64{160, 160, 160, 160, 190, 195, 120, 160, 160, 160, 160, 160}},
		{Client: "official", RecoveryS: -1, GoodputDuringSpike: 80, GoodputAfter: 40, Amplification: 3.5, Failed: 900,
			Goodput: []float64{160, 160, 160, 160, 80, 60, 40, 40, 40, 40, 40, 40}},
	}
	return results, p
}

func TestSpikePageAsAReaderSeesIt(t *testing.T) {
	results, p := fixedSpike()
	var b bytes.Buffer
	if err := writeSpikeHTML(&b, results, p); err != nil {
		t.Fatal(err)
	}
	pg := parsePage(t, b.Bytes())
	checkPage(t, pg, 2)
	want := [][]string{{"sturdy", "0.5", "190", "160", "1.20", "3"}, {"official", "not recovered", "80", "40", "3.50", "900"}}
	if got := pg.rows(t, "clients"); !equalRows(got[1:], want) {
		t.Errorf("clients table: %q", got)
	}
	c := pg.all(withClass("svg", "chart"))[0]
	if l := strings.Join(legendOf(c), "|"); l != "successful requests per second|spike|capacity C|offered load outside the spike" {
		t.Errorf("legend: %s", l)
	}
	// The y axis reaches past capacity and shows it in requests per second.
	var ys []string
	for _, n := range (page{(page{c}).all(withClass("g", "y-axis"))[0]}).all(withClass("text", "tick")) {
		ys = append(ys, text(n))
	}
	if ys[0] != "0" || ys[len(ys)-1] != "250" {
		t.Errorf("y axis values %v, want 0 … 250", ys)
	}
}

func fixedFaults() []faultsResult {
	return []faultsResult{
		{Client: "sturdy", Ops: 1000, Failures: 0, Faults: 100, OpsPerS: 500, P50ms: 1, P99ms: 9, Applied: 1000,
			Timeline: []faultsSecond{{Succeeded: 500, Faults: 50, P99ms: 8}, {Succeeded: 500, Faults: 50, P99ms: 9}}},
		{Client: "official", Ops: 800, Failures: 87, Faults: 100, FailuresPerFault: 0.87, OpsPerS: 356, P50ms: 2, P99ms: 30, Applied: 760,
			Timeline: []faultsSecond{{Succeeded: 360, Failed: 40, Faults: 50, P99ms: 30}, {Succeeded: 353, Failed: 47, Faults: 50, P99ms: 31}}},
	}
}

var fixedFaultsRun = faultsRun{Fault: "reply-lost", Rate: 0.1, Duration: 2 * time.Second, Goroutines: 16, Options: "default options"}

func TestFaultsPageAsAReaderSeesIt(t *testing.T) {
	var b bytes.Buffer
	if err := writeFaultsHTML(&b, fixedFaults(), fixedFaultsRun); err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b.Bytes())
	checkPage(t, p, 6) // failures per fault, goodput, and two per client
	want := [][]string{
		{"sturdy", "1000", "0", "100", "0.000", "500", "1.0", "9.0", "1000 (ok)"},
		{"official", "800", "87", "100", "0.870", "356", "2.0", "30.0", "760 (ok)"},
	}
	if got := p.rows(t, "clients"); !equalRows(got[1:], want) {
		t.Errorf("clients table: %q", got)
	}
	perFault := p.all(withClass("svg", "chart"))[0]
	var values []string
	for _, n := range (page{perFault}).all(withClass("text", "value")) {
		values = append(values, text(n))
	}
	if strings.Join(values, ",") != "0,0.87" {
		t.Errorf("failures per fault bars: %v", values)
	}
	timeline := p.all(withClass("svg", "chart"))[4]
	if l := strings.Join(legendOf(timeline), "|"); l != "succeeded|failed|faults injected" {
		t.Errorf("official's timeline legend: %s", l)
	}
}

func fixedFailover() []failoverResult {
	return []failoverResult{
		{Client: "sturdy", StepDowns: 3, UnavailableP50ms: 4, UnavailableP90ms: 6, UnavailableMaxms: 7, Ops: 900, P99ms: 12, Windows: []float64{4, 7, 3}},
		{Client: "official", StepDowns: 3, UnavailableP50ms: 5, UnavailableP90ms: 900, UnavailableMaxms: 1000, Ops: 700, FailedOps: 12, P99ms: 80, Windows: []float64{5, 1000, 4}},
	}
}

var fixedFailoverRun = failoverRun{Every: 2 * time.Second, Duration: 6 * time.Second}

func TestFailoverPageAsAReaderSeesIt(t *testing.T) {
	var b bytes.Buffer
	if err := writeFailoverHTML(&b, fixedFailover(), fixedFailoverRun); err != nil {
		t.Fatal(err)
	}
	p := parsePage(t, b.Bytes())
	checkPage(t, p, 1)
	if got := p.rows(t, "clients"); !equalRows(got[2:], [][]string{{"official", "3", "5.00", "900.00", "1000.00", "700", "12", "80.0"}}) {
		t.Errorf("clients table: %q", got)
	}
	c := p.all(withClass("svg", "chart"))[0]
	if n := len((page{c}).all(withClass("rect", "bar"))); n != 6 {
		t.Errorf("%d bars, want 6 (3 step-downs × 2 clients)", n)
	}
	var cats []string
	for _, n := range (page{(page{c}).all(withClass("g", "x-axis"))[0]}).all(withClass("text", "tick")) {
		cats = append(cats, text(n))
	}
	if strings.Join(cats, ",") != "1,2,3" {
		t.Errorf("x axis: %v", cats)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

// TestPagesInABrowser takes a headless Chromium screenshot of each page at
// 1400 px and checks it is not blank. STURDY_SCREENSHOTS=DIR keeps the
// PNGs (docs/img holds the committed ones).
func TestPagesInABrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: the pages' screenshots are not taken (apt-get install chromium)")
	}
	dir := t.TempDir()
	keep := os.Getenv("STURDY_SCREENSHOTS")
	pages := map[string]func(*bytes.Buffer) error{
		"soak":     func(b *bytes.Buffer) error { return writeSoakHTML(b, fixedSoakReport()) },
		"demo":     func(b *bytes.Buffer) error { return writeDemoHTML(b, fixedDemoResults()) },
		"spike":    func(b *bytes.Buffer) error { r, p := fixedSpike(); return writeSpikeHTML(b, r, p) },
		"faults":   func(b *bytes.Buffer) error { return writeFaultsHTML(b, fixedFaults(), fixedFaultsRun) },
		"failover": func(b *bytes.Buffer) error { return writeFailoverHTML(b, fixedFailover(), fixedFailoverRun) },
	}
	for name, write := range pages {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(dir, name+".html")
		if err := os.WriteFile(src, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(dir, name+".png")
		if keep != "" {
			shot = filepath.Join(keep, name+".png")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
			"--user-data-dir="+filepath.Join(dir, "profile-"+name), "--window-size=1400,1000", "--screenshot="+shot, "file://"+src)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: chromium: %v\n%s", name, err, out)
		}
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("%s: no screenshot: %v", name, err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		colours := map[uint32]bool{}
		bnd := img.Bounds()
		for y := bnd.Min.Y; y < bnd.Max.Y; y += 7 {
			for x := bnd.Min.X; x < bnd.Max.X; x += 7 {
				r, g, b, _ := img.At(x, y).RGBA()
				colours[r>>8<<16|g>>8<<8|b>>8] = true
			}
		}
		if len(colours) < 8 {
			t.Errorf("%s: the screenshot has %d colours: blank", name, len(colours))
		}
	}
}
