package topology

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/readpref"
)

type ssServer struct {
	Address        string            `bson:"address"`
	AvgRTTMS       *float64          `bson:"avg_rtt_ms"`
	Type           string            `bson:"type"`
	Tags           map[string]string `bson:"tags"`
	MaxWireVersion int32             `bson:"maxWireVersion"`
	LastUpdateTime *int64            `bson:"lastUpdateTime"`
	LastWrite      *struct {
		LastWriteDate int64 `bson:"lastWriteDate"`
	} `bson:"lastWrite"`
}

type ssTopology struct {
	Type    string     `bson:"type"`
	Servers []ssServer `bson:"servers"`
}

type ssReadPref struct {
	Mode                string            `bson:"mode"`
	TagSets             []readpref.TagSet `bson:"tag_sets"`
	MaxStalenessSeconds *int64            `bson:"maxStalenessSeconds"`
}

type ssFile struct {
	Topology             ssTopology  `bson:"topology_description"`
	Operation            string      `bson:"operation"`
	ReadPreference       *ssReadPref `bson:"read_preference"`
	HeartbeatFrequencyMS *int64      `bson:"heartbeatFrequencyMS"`
	Deprioritized        []ssServer  `bson:"deprioritized_servers"`
	Suitable             []ssServer  `bson:"suitable_servers"`
	InLatencyWindow      []ssServer  `bson:"in_latency_window"`
	Error                bool        `bson:"error"`
}

// descriptionFrom builds a Description from a test's topology, as the
// monitors would have.
func descriptionFrom(t *testing.T, tt ssTopology) Description {
	t.Helper()
	kind, ok := ParseTopologyKind(tt.Type)
	if !ok {
		t.Fatalf("unknown topology type %q", tt.Type)
	}
	d := Description{Kind: kind}
	for _, s := range tt.Servers {
		k, ok := ParseServerKind(s.Type)
		if !ok {
			t.Fatalf("unknown server type %q", s.Type)
		}
		sd := ServerDescription{Addr: NormalizeAddr(s.Address), Kind: k, Description: conn.Description{Tags: s.Tags, MaxWireVersion: s.MaxWireVersion}}
		if s.AvgRTTMS != nil {
			sd.RTT = time.Duration(*s.AvgRTTMS * float64(time.Millisecond))
		}
		if s.LastUpdateTime != nil {
			sd.LastUpdateTime = time.UnixMilli(*s.LastUpdateTime)
		}
		if s.LastWrite != nil {
			sd.LastWriteDate = time.UnixMilli(s.LastWrite.LastWriteDate)
		}
		d = d.withServer(sd)
	}
	return d
}

func addrs(servers []ServerDescription) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Addr)
	}
	sort.Strings(out)
	return out
}

func ssAddrs(servers []ssServer) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, NormalizeAddr(s.Address))
	}
	sort.Strings(out)
	return out
}

func TestServerSelectionSpec(t *testing.T) {
	root := testsupport.SpecDir(t, "server-selection", "tests", "server_selection")
	var files []string
	_ = filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skipf("no JSON tests under %s", root)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(strings.TrimSuffix(rel, ".json"), func(t *testing.T) {
			var tf ssFile
			readExtJSON(t, f, &tf)
			d := descriptionFrom(t, tf.Topology)
			heartbeat := 10 * time.Second // the spec tests' default heartbeatFrequencyMS
			if tf.HeartbeatFrequencyMS != nil {
				heartbeat = time.Duration(*tf.HeartbeatFrequencyMS) * time.Millisecond
			}
			var sel Selector = WriteSelector()
			if tf.Operation == "read" {
				rp := readpref.ReadPref{}
				if tf.ReadPreference != nil {
					mode, ok := readpref.ParseMode(tf.ReadPreference.Mode)
					if !ok {
						t.Fatalf("unknown mode %q", tf.ReadPreference.Mode)
					}
					rp.Mode = mode
					rp.TagSets = tf.ReadPreference.TagSets
					if ms := tf.ReadPreference.MaxStalenessSeconds; ms != nil && *ms > 0 {
						rp.MaxStaleness = time.Duration(*ms) * time.Second
					}
				}
				sel = ReadPrefSelector(rp, heartbeat)
			}
			got, err := suitable(d, sel, ssAddrs(tf.Deprioritized))
			if tf.Error {
				var rpe *mongoerr.ReadPrefError
				if !errors.As(err, &rpe) {
					t.Fatalf("want a read preference error, got %v (servers %v)", err, addrs(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := addrs(got), ssAddrs(tf.Suitable); !slices.Equal(g, w) {
				t.Fatalf("suitable = %v, want %v", g, w)
			}
			window := inLatencyWindow(got, 15*time.Millisecond)
			if g, w := addrs(window), ssAddrs(tf.InLatencyWindow); !slices.Equal(g, w) {
				t.Fatalf("in latency window = %v, want %v", g, w)
			}
			if len(window) > 0 {
				r := rand.New(rand.NewPCG(1, 2))
				pick := pickTwoChoices(window, func(string) int64 { return 0 }, r)
				if !slices.Contains(ssAddrs(tf.InLatencyWindow), pick.Addr) {
					t.Fatalf("picked %s, outside the window", pick.Addr)
				}
			}
		})
	}
}

type inWindowFile struct {
	Description string     `bson:"description"`
	Topology    ssTopology `bson:"topology_description"`
	Mocked      []struct {
		Address        string `bson:"address"`
		OperationCount int64  `bson:"operation_count"`
	} `bson:"mocked_topology_state"`
	Iterations int `bson:"iterations"`
	Outcome    struct {
		Tolerance float64            `bson:"tolerance"`
		Expected  map[string]float64 `bson:"expected_frequencies"`
	} `bson:"outcome"`
}

func TestInWindowSpec(t *testing.T) {
	root := testsupport.SpecDir(t, "server-selection", "tests", "in_window")
	files, _ := filepath.Glob(filepath.Join(root, "*.json"))
	if len(files) == 0 {
		t.Skipf("no JSON tests in %s", root)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tf inWindowFile
			readExtJSON(t, f, &tf)
			d := descriptionFrom(t, tf.Topology)
			ops := map[string]int64{}
			for _, m := range tf.Mocked {
				ops[NormalizeAddr(m.Address)] = m.OperationCount
			}
			cands, err := suitable(d, ReadPrefSelector(readpref.ReadPref{Mode: readpref.Nearest}, 0), nil)
			if err != nil {
				t.Fatal(err)
			}
			window := inLatencyWindow(cands, 15*time.Millisecond)
			// The spec asks for 2000 selections, whatever the file says.
			const iterations = 2000
			r := rand.New(rand.NewPCG(7, 11))
			counts := map[string]int{}
			for range iterations {
				p := pickTwoChoices(window, func(a string) int64 { return ops[a] }, r)
				counts[p.Addr]++
			}
			for addr, want := range tf.Outcome.Expected {
				got := float64(counts[NormalizeAddr(addr)]) / iterations
				if math.Abs(got-want) > tf.Outcome.Tolerance {
					t.Errorf("%s: frequency %.3f, want %.3f ± %.3f", addr, got, want, tf.Outcome.Tolerance)
				}
			}
		})
	}
}

type rttFile struct {
	AvgRTTMS  bson.RawValue `bson:"avg_rtt_ms"`
	NewRTTMS  float64       `bson:"new_rtt_ms"`
	NewAvgRTT float64       `bson:"new_avg_rtt"`
}

func TestRTTSpec(t *testing.T) {
	root := testsupport.SpecDir(t, "server-selection", "tests", "rtt")
	files, _ := filepath.Glob(filepath.Join(root, "*.json"))
	if len(files) == 0 {
		t.Skipf("no JSON tests in %s", root)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tf rttFile
			readExtJSON(t, f, &tf)
			var r rttAverage
			if prev, ok := tf.AvgRTTMS.AsFloat64OK(); ok {
				r.add(ms(prev))
			} else if tf.AvgRTTMS.StringValue() != "NULL" {
				t.Fatalf("unexpected avg_rtt_ms %v", tf.AvgRTTMS)
			}
			got := r.add(ms(tf.NewRTTMS))
			if diff := math.Abs(float64(got - ms(tf.NewAvgRTT))); diff > float64(time.Microsecond) {
				t.Fatalf("new average %v, want %v", got, ms(tf.NewAvgRTT))
			}
		})
	}
}

func TestRTTAverageIgnoresNegativeAndResets(t *testing.T) {
	var r rttAverage
	r.add(10 * time.Millisecond)
	if got := r.add(-time.Second); got != 10*time.Millisecond {
		t.Fatalf("negative sample changed the average to %v", got)
	}
	r.reset()
	if got := r.add(3 * time.Millisecond); got != 3*time.Millisecond {
		t.Fatalf("after reset the first sample should be the average, got %v", got)
	}
}
