//go:build ignore

// report runs the client benchmarks several times and prints a markdown
// table comparing sturdy with the official driver, from the module root:
//
//	go run ./internal/harness/clientbench/report.go [-rounds 5] [-benchtime 1s] [-bench .]
//
// Each round is a separate `go test -count 1` run, so sturdy's and the
// official driver's runs interleave and share the machine's ups and downs;
// the table shows the median of the rounds. Ratios are sturdy/official:
// below 1 means sturdy uses less CPU or fewer allocations per operation;
// for throughput above 1 means sturdy does more operations per second.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type sample map[string][]float64 // unit → values, one per round

func main() {
	rounds := flag.Int("rounds", 5, "separate go test runs; the table shows medians")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	bench := flag.String("bench", ".", "go test -bench pattern")
	flag.Parse()

	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		fail("finding the module root: %v", err)
	}
	args := []string{"test", "-run", "^$", "-bench", *bench, "-benchtime", *benchtime, "-count", "1", "./internal/harness/clientbench"}
	results := map[string]sample{}
	var order []string
	start := time.Now()
	for r := 0; r < *rounds; r++ {
		fmt.Fprintf(os.Stderr, "round %d/%d: go %s\n", r+1, *rounds, strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Dir = strings.TrimSpace(string(root))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			os.Stderr.Write(out)
			fail("go test: %v", err)
		}
		for _, line := range parse(out) {
			if results[line.name] == nil {
				results[line.name] = sample{}
				order = append(order, line.name)
			}
			for unit, v := range line.values {
				results[line.name][unit] = append(results[line.name][unit], v)
			}
		}
	}
	printTable(order, results)
	fmt.Printf("\nCommand: `go run ./internal/harness/clientbench/report.go -rounds %d -benchtime %s -bench '%s'` "+
		"(each round: `go %s`), medians of %d rounds, %s total.\n",
		*rounds, *benchtime, *bench, strings.Join(args, " "), *rounds, time.Since(start).Round(time.Second))
	fmt.Printf("Machine: %s, %d CPUs, GOMAXPROCS %d, %s %s/%s; load average at the end: %s.\n",
		cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAvg())
}

type benchLine struct {
	name   string
	values map[string]float64
}

var suffix = regexp.MustCompile(`-\d+$`)

// parse reads `go test -bench` output lines such as
// "BenchmarkCanned/insertOne/g1/sturdy-2  1000  123 ns/op  45 cpu-ns/op ...".
func parse(out []byte) []benchLine {
	var lines []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		l := benchLine{name: suffix.ReplaceAllString(f[0], ""), values: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				l.values[f[i+1]] = v
			}
		}
		lines = append(lines, l)
	}
	return lines
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printTable(order []string, results map[string]sample) {
	fmt.Println("| server | operation | goroutines | CPU µs/op sturdy | CPU µs/op official | **CPU ratio** | allocs/op sturdy | allocs/op official | **allocs ratio** | B/op ratio | ops/s sturdy | ops/s official | **throughput ratio** |")
	fmt.Println("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, name := range order {
		if !strings.HasSuffix(name, "/sturdy") {
			continue
		}
		base := strings.TrimSuffix(name, "/sturdy")
		s, o := results[name], results[base+"/official"]
		if o == nil {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(base, "Benchmark"), "/")
		if len(parts) != 3 {
			continue
		}
		server := map[string]string{"Canned": "canned (blackpipe)", "Sim": "mongosim"}[parts[0]]
		get := func(x sample, unit string) float64 { return median(x[unit]) }
		ratio := func(a, b float64) string {
			switch {
			case b == 0:
				return "–"
			case a/b < 0.05:
				return fmt.Sprintf("%.3f", a/b)
			}
			return fmt.Sprintf("%.2f", a/b)
		}
		sc, oc := get(s, "cpu-ns/op")/1000, get(o, "cpu-ns/op")/1000
		sa, oa := get(s, "allocs/op"), get(o, "allocs/op")
		st, ot := get(s, "ops/s"), get(o, "ops/s")
		fmt.Printf("| %s | %s | %s | %.1f | %.1f | **%s** | %.0f | %.0f | **%s** | %s | %.0f | %.0f | **%s** |\n",
			server, parts[1], strings.TrimPrefix(parts[2], "g"), sc, oc, ratio(sc, oc), sa, oa, ratio(sa, oa),
			ratio(get(s, "B/op"), get(o, "B/op")), st, ot, ratio(st, ot))
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "report: "+format+"\n", args...)
	os.Exit(1)
}
