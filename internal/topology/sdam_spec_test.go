package topology

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// applyHello is the test seam for a monitor check outcome: a hello reply,
// or (empty reply) a network error during the check.
func (t *Topology) applyHello(addr string, reply bson.Raw) {
	addr = NormalizeAddr(addr)
	if len(reply) <= 5 {
		t.applyCheck(unknownServer(addr, &mongoerr.NetworkError{Addr: addr, Op: "read", Err: io.ErrUnexpectedEOF}))
		return
	}
	t.applyCheck(NewServerDescription(addr, reply, 0))
}

type sdamFile struct {
	Description string      `bson:"description"`
	URI         string      `bson:"uri"`
	Phases      []sdamPhase `bson:"phases"`
}

type sdamPhase struct {
	Description       string          `bson:"description"`
	Responses         []bson.RawValue `bson:"responses"`
	ApplicationErrors []appError      `bson:"applicationErrors"`
	Outcome           bson.Raw        `bson:"outcome"`
}

type appError struct {
	Address        string   `bson:"address"`
	Generation     *int64   `bson:"generation"`
	MaxWireVersion int32    `bson:"maxWireVersion"`
	When           string   `bson:"when"`
	Type           string   `bson:"type"`
	Response       bson.Raw `bson:"response"`
}

// optionsFromURI reads the few URI parts the SDAM tests use.
func optionsFromURI(t *testing.T, uri string) Options {
	t.Helper()
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		t.Fatalf("unsupported uri %q", uri)
	}
	hostPart, query, _ := strings.Cut(rest, "?")
	hostPart = strings.TrimSuffix(hostPart, "/")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatalf("uri %q: %v", uri, err)
	}
	return Options{
		Hosts:   strings.Split(hostPart, ","),
		SetName: q.Get("replicaSet"),
		Direct:  q.Get("directConnection") == "true",
	}
}

func readExtJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON(data, false, &raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := bson.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestSDAMSpec(t *testing.T) {
	for _, dir := range []string{"single", "rs", "sharded", "errors"} {
		t.Run(dir, func(t *testing.T) {
			root := testsupport.SpecDir(t, "server-discovery-and-monitoring", "tests", dir)
			files, _ := filepath.Glob(filepath.Join(root, "*.json"))
			if len(files) == 0 {
				t.Skipf("no JSON tests in %s", root)
			}
			for _, f := range files {
				t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
					var tf sdamFile
					readExtJSON(t, f, &tf)
					runSDAMFile(t, tf)
				})
			}
		})
	}
}

func runSDAMFile(t *testing.T, tf sdamFile) {
	o := optionsFromURI(t, tf.URI)
	topo, err := New(withTestDefaults(o))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := topo.Disconnect(ctx); err != nil {
			t.Error(err)
		}
	}()
	for i, ph := range tf.Phases {
		for _, r := range ph.Responses {
			arr, ok := r.ArrayOK()
			if !ok {
				t.Fatalf("phase %d: response is not an array", i)
			}
			vals, _ := arr.Values()
			topo.applyHello(vals[0].StringValue(), vals[1].Document())
		}
		for _, ae := range ph.ApplicationErrors {
			applyAppError(t, topo, ae)
		}
		if err := checkOutcome(topo, ph.Outcome); err != nil {
			t.Fatalf("%s: phase %d (%s): %v\ndescription: %s", tf.Description, i, ph.Description, err, topo.Description())
		}
	}
}

// applyAppError builds the error an operation would have seen and hands it
// to the error handling, as the pool and executor would.
func applyAppError(t *testing.T, topo *Topology, ae appError) {
	t.Helper()
	addr := NormalizeAddr(ae.Address)
	s, ok := topo.Server(addr)
	if !ok {
		t.Fatalf("application error for unknown server %s", addr)
	}
	gen := s.Pool().Generation()
	if ae.Generation != nil {
		gen = uint64(*ae.Generation)
	}
	before := ae.When == "beforeHandshakeCompletes"
	var err error
	switch ae.Type {
	case "command":
		err = mongoerr.FromReply(ae.Response)
		if err == nil {
			t.Fatalf("command error response has ok: 1: %v", ae.Response)
		}
	case "network":
		err = &mongoerr.NetworkError{Addr: addr, Op: "read", Err: io.ErrUnexpectedEOF}
	case "timeout":
		err = &mongoerr.NetworkError{Addr: addr, Op: "read", Err: fmt.Errorf("i/o: %w", context.DeadlineExceeded)}
	default:
		t.Fatalf("unknown application error type %q", ae.Type)
	}
	if before && ae.Type != "command" {
		// The pool labels network errors met while connecting or during the
		// hello as possible overload (CMAP "backpressure-enabled").
		ne := err.(*mongoerr.NetworkError)
		ne.Op = "handshake"
		ne.Labels = []string{mongoerr.LabelSystemOverloaded, mongoerr.LabelRetryable}
	}
	s.ProcessError(err, gen, before)
}

func checkOutcome(topo *Topology, outcome bson.Raw) error {
	d := topo.Description()
	if v, err := outcome.LookupErr("topologyType"); err == nil && v.StringValue() != d.Kind.String() {
		return fmt.Errorf("topologyType = %s, want %s", d.Kind, v.StringValue())
	}
	if v, err := outcome.LookupErr("setName"); err == nil {
		if want := nullableString(v); want != d.SetName {
			return fmt.Errorf("setName = %q, want %q", d.SetName, want)
		}
	}
	if v, err := outcome.LookupErr("logicalSessionTimeoutMinutes"); err == nil {
		if err := compareInt("logicalSessionTimeoutMinutes", d.LogicalSessionTimeoutMinutes, v); err != nil {
			return err
		}
	}
	if v, err := outcome.LookupErr("maxSetVersion"); err == nil {
		if err := compareInt("maxSetVersion", d.MaxSetVersion, v); err != nil {
			return err
		}
	}
	if v, err := outcome.LookupErr("maxElectionId"); err == nil {
		if err := compareOID("maxElectionId", d.MaxElectionID, v); err != nil {
			return err
		}
	}
	if v, err := outcome.LookupErr("compatible"); err == nil {
		if got := d.CompatibilityErr == nil; got != v.Boolean() {
			return fmt.Errorf("compatible = %v (%v), want %v", got, d.CompatibilityErr, v.Boolean())
		}
	}
	servers, err := outcome.LookupErr("servers")
	if err != nil {
		return nil
	}
	want, _ := servers.Document().Elements()
	var wantAddrs, gotAddrs []string
	for _, e := range want {
		wantAddrs = append(wantAddrs, NormalizeAddr(e.Key()))
	}
	for _, s := range d.Servers {
		gotAddrs = append(gotAddrs, s.Addr)
	}
	sort.Strings(wantAddrs)
	if strings.Join(wantAddrs, ",") != strings.Join(gotAddrs, ",") {
		return fmt.Errorf("servers = %v, want %v", gotAddrs, wantAddrs)
	}
	for _, e := range want {
		addr := NormalizeAddr(e.Key())
		sd, _ := d.Server(addr)
		if err := checkServer(topo, sd, e.Value().Document()); err != nil {
			return fmt.Errorf("server %s: %w", addr, err)
		}
	}
	return nil
}

func checkServer(topo *Topology, sd ServerDescription, want bson.Raw) error {
	if v, err := want.LookupErr("type"); err == nil && v.StringValue() != sd.Kind.String() {
		return fmt.Errorf("type = %s, want %s", sd.Kind, v.StringValue())
	}
	if v, err := want.LookupErr("setName"); err == nil {
		if w := nullableString(v); w != sd.SetName {
			return fmt.Errorf("setName = %q, want %q", sd.SetName, w)
		}
	}
	if v, err := want.LookupErr("setVersion"); err == nil {
		if err := compareInt("setVersion", sd.SetVersion, v); err != nil {
			return err
		}
	}
	if v, err := want.LookupErr("electionId"); err == nil {
		if err := compareOID("electionId", sd.ElectionID, v); err != nil {
			return err
		}
	}
	if v, err := want.LookupErr("logicalSessionTimeoutMinutes"); err == nil {
		if err := compareInt("logicalSessionTimeoutMinutes", sd.LogicalSessionTimeoutMinutes, v); err != nil {
			return err
		}
	}
	if v, err := want.LookupErr("minWireVersion"); err == nil && int64(sd.MinWireVersion) != v.AsInt64() {
		return fmt.Errorf("minWireVersion = %d, want %d", sd.MinWireVersion, v.AsInt64())
	}
	if v, err := want.LookupErr("maxWireVersion"); err == nil && int64(sd.MaxWireVersion) != v.AsInt64() {
		return fmt.Errorf("maxWireVersion = %d, want %d", sd.MaxWireVersion, v.AsInt64())
	}
	if v, err := want.LookupErr("topologyVersion"); err == nil {
		var w *TopologyVersion
		if v.Type != bson.TypeNull {
			w = conn.ParseTopologyVersion(v)
		}
		if !eqPtr(w, sd.TopologyVersion) {
			return fmt.Errorf("topologyVersion = %v, want %v", sd.TopologyVersion, w)
		}
	}
	if v, err := want.LookupErr("error"); err == nil {
		if sd.Err == nil || !strings.Contains(sd.Err.Error(), v.StringValue()) {
			return fmt.Errorf("error = %v, want it to contain %q", sd.Err, v.StringValue())
		}
	}
	if v, err := want.LookupErr("pool", "generation"); err == nil {
		s, ok := topo.Server(sd.Addr)
		if !ok {
			return fmt.Errorf("no Server object")
		}
		if g := s.Pool().Generation(); int64(g) != v.AsInt64() {
			return fmt.Errorf("pool generation = %d, want %d", g, v.AsInt64())
		}
	}
	return nil
}

func nullableString(v bson.RawValue) string {
	s, _ := v.StringValueOK()
	return s
}

func compareInt(name string, got *int64, want bson.RawValue) error {
	if want.Type == bson.TypeNull {
		if got != nil {
			return fmt.Errorf("%s = %d, want null", name, *got)
		}
		return nil
	}
	w := want.AsInt64()
	if got == nil || *got != w {
		return fmt.Errorf("%s = %v, want %d", name, fmtPtr(got), w)
	}
	return nil
}

func compareOID(name string, got *bson.ObjectID, want bson.RawValue) error {
	if want.Type == bson.TypeNull {
		if got != nil {
			return fmt.Errorf("%s = %s, want null", name, got.Hex())
		}
		return nil
	}
	w := want.ObjectID()
	if got == nil || *got != w {
		return fmt.Errorf("%s = %v, want %s", name, fmtPtr(got), w.Hex())
	}
	return nil
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
