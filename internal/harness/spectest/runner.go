package spectest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// Config says what the runner runs against.
type Config struct {
	// URI is the connection string of the deployment under test.
	URI string
	// ClientDefaults are URI options ("retryWrites=true&heartbeatFrequencyMS=500")
	// applied to every client entity that does not set them itself.
	ClientDefaults string
	// Auth says the deployment requires authentication (runOnRequirements
	// auth: true); the URI then carries the credentials.
	Auth bool
	// Serverless says the deployment is Atlas Serverless.
	Serverless bool
	// ShardCollections shards each initialData collection on {_id:
	// "hashed"} before its documents are inserted (sharded deployments
	// only), to run the tests against sharded collections. Tests that
	// rely on natural order or on unique indexes without the shard key
	// then fail as they would on mongos.
	ShardCollections bool
	// MultiURI, for a load-balanced deployment, is the load balancer in
	// front of several mongoses, for clients with useMultipleMongoses
	// (URI then fronts one mongos, as the load-balancer spec's test setup
	// has it). Mongoses are direct connection strings to every mongos
	// behind them, through which fail points are switched off.
	MultiURI string
	Mongoses []string
}

// Runner runs unified test files against one deployment. Create it with
// NewRunner and Close it when done.
type Runner struct {
	cfg      Config
	internal *sturdy.Client
	version  [3]int
	topology string // "single", "replicaset", "sharded", "load-balanced"
	mongosim bool   // the deployment is mongosim (buildInfo's gitVersion says so)

	// mongoses are direct clients to each mongos of a sharded deployment:
	// fail points set through a single-mongos client are switched off on
	// every one.
	mongoses []*sturdy.Client
	// mongosAddrs are the mongoses' addresses, in mongoses' order, for
	// targetedFailPoint.
	mongosAddrs []string

	paramsMu sync.Mutex
	params   map[string]bson.RawValue // getParameter cache
}

// supportedSchema is the newest schema version the runner understands.
var supportedSchema = [3]int{1, 26, 0}

// NewRunner connects the internal client and learns the server's version
// and topology.
func NewRunner(ctx context.Context, cfg Config) (*Runner, error) {
	c, err := sturdy.Connect(ctx, cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("internal client: %w", err)
	}
	r := &Runner{cfg: cfg, internal: c, params: map[string]bson.RawValue{}}
	admin := c.Database("admin")
	bi, err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}})
	if err != nil {
		_ = c.Disconnect(ctx)
		return nil, fmt.Errorf("buildInfo: %w", err)
	}
	r.mongosim = lookupString(bi, "gitVersion") == "mongosim"
	if va, ok := bi.Lookup("versionArray").ArrayOK(); ok {
		vals, _ := va.Values()
		for i := 0; i < 3 && i < len(vals); i++ {
			n, _ := asInt(vals[i])
			r.version[i] = int(n)
		}
	} else {
		r.version, _ = parseVersion(lookupString(bi, "version"))
	}
	hello, err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		_ = c.Disconnect(ctx)
		return nil, fmt.Errorf("hello: %w", err)
	}
	switch {
	case strings.Contains(strings.ToLower(cfg.URI), "loadbalanced=true"):
		r.topology = "load-balanced"
	case lookupString(hello, "msg") == "isdbgrid":
		r.topology = "sharded"
	case lookupString(hello, "setName") != "":
		r.topology = "replicaset"
	default:
		r.topology = "single"
	}
	mongoses := cfg.Mongoses
	if r.topology == "sharded" && len(mongoses) == 0 {
		for _, h := range uriHosts(cfg.URI) {
			mongoses = append(mongoses, withHosts(cfg.URI, []string{h}))
		}
	}
	if r.topology == "sharded" || r.topology == "load-balanced" {
		for _, h := range mongoses {
			mc, err := sturdy.Connect(ctx, h)
			if err != nil {
				_ = r.Close(ctx)
				return nil, fmt.Errorf("client for mongos %s: %w", h, err)
			}
			r.mongoses = append(r.mongoses, mc)
			addr := h
			if hosts := uriHosts(h); len(hosts) == 1 {
				addr = hosts[0]
			}
			r.mongosAddrs = append(r.mongosAddrs, addr)
		}
	}
	// Terminate open transactions left by earlier runs.
	_, _ = admin.RunCommand(ctx, bson.D{{Key: "killAllSessions", Value: bson.A{}}})
	return r, nil
}

// Topology is the deployment's topology as runOnRequirements names it.
func (r *Runner) Topology() string { return r.topology }

// Mongosim reports whether the deployment is mongosim, to which the
// expected failures of mongosim's own (reasons starting "mongosim:")
// apply; against MongoDB they must pass.
func (r *Runner) Mongosim() bool { return r.mongosim }

// ServerVersion is the deployment's version.
func (r *Runner) ServerVersion() string {
	return fmt.Sprintf("%d.%d.%d", r.version[0], r.version[1], r.version[2])
}

// Close disconnects the internal client.
func (r *Runner) Close(ctx context.Context) error {
	for _, mc := range r.mongoses {
		_ = mc.Disconnect(ctx)
	}
	return r.internal.Disconnect(ctx)
}

// File is one parsed unified test file.
type File struct {
	Path        string
	Description string
	Schema      string
	doc         bson.Raw
	Tests       []Test
}

// Test is one test of a file.
type Test struct {
	Description string
	doc         bson.Raw
}

// LoadFile reads and parses a unified test file. It returns (nil, nil) for
// a JSON file that is not in the unified format (no schemaVersion).
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(data, false, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sv, ok := doc.Lookup("schemaVersion").StringValueOK()
	if !ok {
		return nil, nil
	}
	f := &File{Path: path, Description: lookupString(doc, "description"), Schema: sv, doc: doc}
	tests, ok := doc.Lookup("tests").ArrayOK()
	if !ok {
		return nil, fmt.Errorf("%s: tests must be an array", path)
	}
	vals, _ := tests.Values()
	for _, v := range vals {
		td, ok := v.DocumentOK()
		if !ok {
			return nil, fmt.Errorf("%s: a test must be a document", path)
		}
		f.Tests = append(f.Tests, Test{Description: lookupString(td, "description"), doc: td})
	}
	return f, nil
}

// FindFiles returns the unified test files under dir: dir itself if it
// holds JSON files, otherwise every "tests" directory below it (and their
// subdirectories), in lexical order. Non-unified JSON files are left out by
// LoadFile, not here.
func FindFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if !strings.Contains(filepath.ToSlash(rel), "/") || strings.Contains("/"+filepath.ToSlash(rel), "/tests/") {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// Outcome is the result of one test.
type Outcome struct {
	// Skipped is set when the test could not apply; Reason says why.
	Skipped bool
	Reason  string
	// Err is the failure, nil if the test passed or was skipped.
	Err error
}

// unsupportedError marks a feature the runner or sturdy does not have: the
// test is skipped with this reason, not failed.
type unsupportedError struct{ what string }

func (e *unsupportedError) Error() string { return "not supported: " + e.what }

func unsupportedf(format string, args ...any) error {
	return &unsupportedError{what: fmt.Sprintf(format, args...)}
}

// Run runs test i of f: requirements, initial data, entities, operations,
// event and outcome assertions, then clean-up.
func (r *Runner) Run(ctx context.Context, f *File, i int) (out Outcome) {
	if v, err := parseVersion(f.Schema); err != nil || v[0] != supportedSchema[0] || compareVersion(v, supportedSchema) > 0 {
		return Outcome{Err: fmt.Errorf("schema version %q is not supported (runner supports up to %d.%d)", f.Schema, supportedSchema[0], supportedSchema[1])}
	}
	t := f.Tests[i]
	if reason := r.unmetRequirements(ctx, f.doc.Lookup("runOnRequirements")); reason != "" {
		return Outcome{Skipped: true, Reason: reason}
	}
	if reason := r.unmetRequirements(ctx, t.doc.Lookup("runOnRequirements")); reason != "" {
		return Outcome{Skipped: true, Reason: reason}
	}
	if s, ok := t.doc.Lookup("skipReason").StringValueOK(); ok {
		return Outcome{Skipped: true, Reason: "skipReason: " + s}
	}
	if t.doc.Lookup("expectLogMessages").Type != 0 {
		return Outcome{Skipped: true, Reason: "not supported: log message assertions (expectLogMessages): sturdy logs through log/slog without the logging specification's structured messages"}
	}
	if t.doc.Lookup("expectTracingMessages").Type != 0 {
		return Outcome{Skipped: true, Reason: "not supported: tracing (expectTracingMessages)"}
	}
	tr := &testRun{r: r, file: f, test: t, entities: newEntityMap()}
	tr.m = &matcher{entities: tr.entities}
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Err: fmt.Errorf("panic: %v", p)}
		}
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tr.cleanup(cctx)
	}()
	err := tr.run(ctx)
	var ue *unsupportedError
	if errors.As(err, &ue) {
		return Outcome{Skipped: true, Reason: ue.Error()}
	}
	return Outcome{Err: err}
}

// RequiresAuth reports whether test i of f can only run against a
// deployment with authentication: every entry of the file's or of the
// test's runOnRequirements asks for auth: true. The embedded test
// deployment then runs the test against an auth-enabled server.
func RequiresAuth(f *File, i int) bool {
	return requiresAuth(f.doc.Lookup("runOnRequirements")) || requiresAuth(f.Tests[i].doc.Lookup("runOnRequirements"))
}

// requiresAuth reports whether every entry of a runOnRequirements list asks
// for auth: true.
func requiresAuth(v bson.RawValue) bool {
	arr, ok := v.ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return false
	}
	for _, rv := range vals {
		d, ok := rv.DocumentOK()
		if !ok {
			return false
		}
		if b, ok := d.Lookup("auth").BooleanOK(); !ok || !b {
			return false
		}
	}
	return true
}

// testRun is the state of one test while it runs.
type testRun struct {
	r          *Runner
	file       *File
	test       Test
	entities   *entityMap
	m          *matcher
	failPoints []bson.D // configureFailPoint names to switch off afterwards
}

func (tr *testRun) run(ctx context.Context) error {
	if err := tr.r.loadData(ctx, tr.file.doc.Lookup("initialData")); err != nil {
		return fmt.Errorf("initialData: %w", err)
	}
	if ents, ok := tr.file.doc.Lookup("createEntities").ArrayOK(); ok {
		vals, _ := ents.Values()
		for _, v := range vals {
			d, err := docValue(v, "createEntities")
			if err != nil {
				return err
			}
			if err := tr.createEntity(ctx, d); err != nil {
				return err
			}
		}
	}
	ops, _ := tr.test.doc.Lookup("operations").ArrayOK()
	vals, _ := ops.Values()
	for i, v := range vals {
		d, err := docValue(v, "operation")
		if err != nil {
			return err
		}
		if err := tr.runOperation(ctx, d); err != nil {
			return fmt.Errorf("operation %d (%s on %s): %w", i, lookupString(d, "name"), lookupString(d, "object"), err)
		}
	}
	// Stop recording before the assertions (and before clean-up sends
	// anything).
	for _, id := range tr.entities.order {
		if c, ok := tr.entities.m[id].(*clientEntity); ok {
			c.rec.stop()
		}
	}
	if err := tr.disableFailPoints(ctx); err != nil {
		return err
	}
	if err := tr.checkEvents(); err != nil {
		return err
	}
	return tr.checkOutcome(ctx)
}

func (tr *testRun) cleanup(ctx context.Context) {
	_ = tr.disableFailPoints(ctx)
	tr.entities.close(ctx)
}

// disableFailPoints switches off every fail point the test configured.
func (tr *testRun) disableFailPoints(ctx context.Context) error {
	var first error
	targets := tr.r.mongoses
	if len(targets) == 0 {
		targets = []*sturdy.Client{tr.r.internal}
	}
	for _, fp := range tr.failPoints {
		for _, c := range targets {
			_, err := c.Database("admin").RunCommand(ctx, fp)
			if err != nil && first == nil {
				first = fmt.Errorf("disabling fail point: %w", err)
			}
		}
	}
	tr.failPoints = nil
	return first
}

func (tr *testRun) checkEvents() error {
	exp, ok := tr.test.doc.Lookup("expectEvents").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := exp.Values()
	for _, v := range vals {
		d, err := docValue(v, "expectEvents")
		if err != nil {
			return err
		}
		c, err := lookup[*clientEntity](tr.entities, lookupString(d, "client"))
		if err != nil {
			return err
		}
		category := lookupString(d, "eventType")
		if category == "" {
			category = "command"
		}
		var expected []bson.Raw
		evs, _ := d.Lookup("events").ArrayOK()
		ev, _ := evs.Values()
		for _, e := range ev {
			expected = append(expected, e.Document())
		}
		all, _ := c.rec.snapshot()
		var actual []*observed
		for _, o := range all {
			if o.category() == category {
				actual = append(actual, o)
			}
		}
		ignoreExtra, _ := d.Lookup("ignoreExtraEvents").BooleanOK()
		if err := tr.m.matchEvents(expected, actual, ignoreExtra); err != nil {
			return fmt.Errorf("expectEvents for %s (%s): %w", c.id, category, err)
		}
	}
	return nil
}

// loadData sets up initialData: drop each collection, create it (with its
// createOptions) and insert its documents, all with a majority write concern.
func (r *Runner) loadData(ctx context.Context, v bson.RawValue) error {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	majority := bson.D{{Key: "w", Value: "majority"}}
	for _, cv := range vals {
		cd, err := docValue(cv, "collectionData")
		if err != nil {
			return err
		}
		dbName, collName := lookupString(cd, "databaseName"), lookupString(cd, "collectionName")
		db := r.internal.Database(dbName)
		for _, name := range []string{collName, "enxcol_." + collName + ".esc", "enxcol_." + collName + ".ecoc"} {
			if _, err := db.RunCommand(ctx, bson.D{{Key: "drop", Value: name}, {Key: "writeConcern", Value: majority}}); err != nil && !isNamespaceNotFound(err) {
				return fmt.Errorf("drop %s.%s: %w", dbName, name, err)
			}
		}
		docs, _ := cd.Lookup("documents").ArrayOK()
		dv, _ := docs.Values()
		create, hasCreate := cd.Lookup("createOptions").DocumentOK()
		if hasCreate || len(dv) == 0 {
			cmd := bson.D{{Key: "create", Value: collName}}
			if hasCreate {
				elems, _ := create.Elements()
				for _, e := range elems {
					cmd = append(cmd, bson.E{Key: e.Key(), Value: e.Value()})
				}
			}
			cmd = append(cmd, bson.E{Key: "writeConcern", Value: majority})
			if _, err := db.RunCommand(ctx, cmd); err != nil {
				return fmt.Errorf("create %s.%s: %w", dbName, collName, err)
			}
		}
		if r.cfg.ShardCollections && r.topology == "sharded" {
			cmd := bson.D{{Key: "shardCollection", Value: dbName + "." + collName}, {Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}}
			if _, err := r.internal.Database("admin").RunCommand(ctx, cmd); err != nil {
				return fmt.Errorf("shardCollection %s.%s: %w", dbName, collName, err)
			}
		}
		if len(dv) > 0 {
			a := make(bson.A, len(dv))
			for i, d := range dv {
				a[i] = d
			}
			if _, err := db.RunCommand(ctx, bson.D{{Key: "insert", Value: collName}, {Key: "documents", Value: a}, {Key: "writeConcern", Value: majority}}); err != nil {
				return fmt.Errorf("insert into %s.%s: %w", dbName, collName, err)
			}
		}
	}
	return nil
}

func isNamespaceNotFound(err error) bool {
	var ce *sturdy.CommandError
	return errors.As(err, &ce) && ce.Code == 26
}

// checkOutcome compares each outcome collection's documents, sorted by _id,
// exactly with the expected ones.
func (tr *testRun) checkOutcome(ctx context.Context) error {
	arr, ok := tr.test.doc.Lookup("outcome").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	for _, cv := range vals {
		cd, err := docValue(cv, "outcome")
		if err != nil {
			return err
		}
		dbName, collName := lookupString(cd, "databaseName"), lookupString(cd, "collectionName")
		coll := tr.r.internal.Database(dbName, &sturdy.DatabaseOptions{ReadConcernLevel: "local"}).Collection(collName)
		cur, err := coll.Find(ctx, bson.D{}, &sturdy.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
		if err != nil {
			return fmt.Errorf("outcome: reading %s.%s: %w", dbName, collName, err)
		}
		var got []bson.Raw
		if err := cur.All(ctx, &got); err != nil {
			return fmt.Errorf("outcome: reading %s.%s: %w", dbName, collName, err)
		}
		want, _ := cd.Lookup("documents").ArrayOK()
		wv, _ := want.Values()
		mismatch := len(wv) != len(got)
		for i := 0; !mismatch && i < len(wv); i++ {
			mismatch = !exactEqual(wv[i], bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: got[i]})
		}
		if mismatch {
			var gs []string
			for _, g := range got {
				gs = append(gs, docJSON(g))
			}
			return fmt.Errorf("outcome %s.%s: expected %s, got [%s]", dbName, collName, shortJSON(cd.Lookup("documents")), strings.Join(gs, ", "))
		}
	}
	return nil
}

// unmetRequirements returns why none of a runOnRequirements list is met, or
// "" if one is (or the list is absent).
func (r *Runner) unmetRequirements(ctx context.Context, v bson.RawValue) string {
	arr, ok := v.ArrayOK()
	if !ok {
		return ""
	}
	vals, _ := arr.Values()
	var reasons []string
	for _, rv := range vals {
		d, ok := rv.DocumentOK()
		if !ok {
			continue
		}
		reason := r.unmet(ctx, d)
		if reason == "" {
			return ""
		}
		reasons = append(reasons, reason)
	}
	return "runOnRequirements not met: " + strings.Join(reasons, "; or ")
}

// unmet says why the server does not meet one runOnRequirement ("" if it
// does).
func (r *Runner) unmet(ctx context.Context, req bson.Raw) string {
	elems, _ := req.Elements()
	var why []string
	for _, e := range elems {
		check, ok := requirementChecks[e.Key()]
		if !ok {
			why = append(why, "unknown requirement "+e.Key())
			continue
		}
		why = append(why, check(r, ctx, e.Value())...)
	}
	return strings.Join(why, ", ")
}

// requirementChecks check the fields of a runOnRequirement: each returns
// why the deployment does not meet it (nothing if it does).
var requirementChecks = map[string]func(r *Runner, ctx context.Context, v bson.RawValue) []string{
	"minServerVersion": (*Runner).checkMinServerVersion,
	"maxServerVersion": (*Runner).checkMaxServerVersion,
	"topologies":       (*Runner).checkTopologies,
	"serverless":       (*Runner).checkServerless,
	"auth":             (*Runner).checkAuth,
	"authMechanism":    (*Runner).checkAuthMechanism,
	"csfle":            (*Runner).checkCSFLE,
	"serverParameters": (*Runner).checkServerParameters,
}

func (r *Runner) checkMinServerVersion(_ context.Context, v bson.RawValue) []string {
	min, _ := parseVersion(v.StringValue())
	if compareVersion(r.version, min) < 0 {
		return []string{fmt.Sprintf("server %s < minServerVersion %s", r.ServerVersion(), v.StringValue())}
	}
	return nil
}

func (r *Runner) checkMaxServerVersion(_ context.Context, v bson.RawValue) []string {
	max, _ := parseVersion(v.StringValue())
	if compareVersion(r.version, max) > 0 {
		return []string{fmt.Sprintf("server %s > maxServerVersion %s", r.ServerVersion(), v.StringValue())}
	}
	return nil
}

func (r *Runner) checkTopologies(_ context.Context, v bson.RawValue) []string {
	arr, _ := v.ArrayOK()
	vals, _ := arr.Values()
	var names []string
	ok := false
	for _, v := range vals {
		n := v.StringValue()
		names = append(names, n)
		if n == r.topology || (n == "sharded-replicaset" && r.topology == "sharded") {
			ok = true
		}
	}
	if !ok {
		return []string{fmt.Sprintf("topology %s not in %v", r.topology, names)}
	}
	return nil
}

func (r *Runner) checkServerless(_ context.Context, v bson.RawValue) []string {
	switch v.StringValue() {
	case "require":
		if !r.cfg.Serverless {
			return []string{"requires Atlas Serverless"}
		}
	case "forbid":
		if r.cfg.Serverless {
			return []string{"forbids Atlas Serverless"}
		}
	}
	return nil
}

func (r *Runner) checkAuth(_ context.Context, v bson.RawValue) []string {
	if v.Boolean() != r.cfg.Auth {
		return []string{fmt.Sprintf("auth: %v but the deployment has auth %v", v.Boolean(), r.cfg.Auth)}
	}
	return nil
}

func (r *Runner) checkAuthMechanism(_ context.Context, v bson.RawValue) []string {
	if !r.cfg.Auth {
		return []string{"authMechanism " + v.StringValue() + " needs authentication"}
	}
	return nil
}

func (*Runner) checkCSFLE(_ context.Context, v bson.RawValue) []string {
	if b, ok := v.BooleanOK(); !ok || b {
		return []string{"client-side field level encryption is not supported"}
	}
	return nil
}

func (r *Runner) checkServerParameters(ctx context.Context, v bson.RawValue) []string {
	d, _ := v.DocumentOK()
	params, _ := d.Elements()
	var why []string
	for _, p := range params {
		got, err := r.serverParameter(ctx, p.Key())
		if err != nil {
			why = append(why, fmt.Sprintf("server parameter %s unavailable: %v", p.Key(), err))
			continue
		}
		if !scalarEqual(p.Value(), got) && !(p.Value().Type == got.Type && exactEqual(p.Value(), got)) {
			why = append(why, fmt.Sprintf("server parameter %s is %s, need %s", p.Key(), shortJSON(got), shortJSON(p.Value())))
		}
	}
	return why
}

func (r *Runner) serverParameter(ctx context.Context, name string) (bson.RawValue, error) {
	r.paramsMu.Lock()
	defer r.paramsMu.Unlock()
	if v, ok := r.params[name]; ok {
		return v, nil
	}
	reply, err := r.internal.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: name, Value: 1}})
	if err != nil {
		return bson.RawValue{}, err
	}
	v, err := reply.LookupErr(name)
	if err != nil {
		return bson.RawValue{}, fmt.Errorf("not in the getParameter reply")
	}
	r.params[name] = v
	return v, nil
}

// parseVersion parses "major[.minor[.patch]]", ignoring anything after a
// '-' (pre-release suffixes).
func parseVersion(s string) ([3]int, error) {
	var v [3]int
	s, _, _ = strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return v, fmt.Errorf("bad version %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("bad version %q", s)
		}
		v[i] = n
	}
	return v, nil
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
