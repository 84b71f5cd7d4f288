package spectest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// clientEntity is a client under test with the events it observes.
type clientEntity struct {
	id     string
	client *sturdy.Client
	rec    *recorder
}

type databaseEntity struct {
	client *clientEntity
	db     *sturdy.Database
}

type collectionEntity struct {
	client *clientEntity
	coll   *sturdy.Collection
}

type sessionEntity struct {
	client *clientEntity
	sess   *sturdy.Session
	lsid   bson.Raw // remembered once seen: the session forgets it when it ends
	ended  bool
}

// id returns the session's lsid, remembering it for after the session ends.
func (s *sessionEntity) id() bson.Raw {
	if id := s.sess.ID(); id != nil {
		s.lsid = id
	}
	return s.lsid
}

// entityMap holds the entities of one test.
type entityMap struct {
	m     map[string]any
	order []string
}

func newEntityMap() *entityMap { return &entityMap{m: map[string]any{}} }

func (e *entityMap) add(id string, v any) error {
	if id == "" {
		return errors.New("entity without an id")
	}
	if _, dup := e.m[id]; dup {
		return fmt.Errorf("entity %q is already defined", id)
	}
	e.m[id] = v
	e.order = append(e.order, id)
	return nil
}

func lookup[T any](e *entityMap, id string) (T, error) {
	var zero T
	v, ok := e.m[id]
	if !ok {
		return zero, fmt.Errorf("entity %q is not defined", id)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("entity %q is a %T, not a %T", id, v, zero)
	}
	return t, nil
}

// value returns a BSON entity (a saved result) for $$matchesEntity.
func (e *entityMap) value(id string) (bson.RawValue, error) {
	return lookup[bson.RawValue](e, id)
}

// sessionLsid returns the lsid of a session entity for $$sessionLsid.
func (e *entityMap) sessionLsid(id string) (bson.Raw, error) {
	s, err := lookup[*sessionEntity](e, id)
	if err != nil {
		return nil, err
	}
	lsid := s.id()
	if lsid == nil {
		return nil, fmt.Errorf("session %q has no lsid yet (it has not been used)", id)
	}
	return lsid, nil
}

// close ends sessions and disconnects clients, in reverse creation order.
func (e *entityMap) close(ctx context.Context) {
	for i := len(e.order) - 1; i >= 0; i-- {
		switch v := e.m[e.order[i]].(type) {
		case *sessionEntity:
			if !v.ended {
				v.sess.EndSession(ctx)
			}
		case *clientEntity:
			v.rec.stop()
			_ = v.client.Disconnect(ctx)
		case interface{ close(context.Context) }: // change streams
			v.close(ctx)
		}
	}
}

// entityCreators create the entities of each kind from their descriptions
// and add them to the map under id.
var entityCreators = map[string]func(tr *testRun, ctx context.Context, id string, spec bson.Raw) error{
	"client":           (*testRun).createClientEntity,
	"database":         (*testRun).createDatabaseEntity,
	"collection":       (*testRun).createCollectionEntity,
	"session":          (*testRun).createSessionEntity,
	"bucket":           (*testRun).createBucket,
	"thread":           unsupportedEntity("thread entities"),
	"clientEncryption": unsupportedEntity("client-side encryption entities"),
}

// unsupportedEntity is the creator of an entity kind the runner does not
// support.
func unsupportedEntity(what string) func(*testRun, context.Context, string, bson.Raw) error {
	return func(*testRun, context.Context, string, bson.Raw) error { return unsupportedf("%s", what) }
}

// createEntity creates one entity from its description ({client: {...}},
// {database: {...}}...) and adds it to the map.
func (tr *testRun) createEntity(ctx context.Context, desc bson.Raw) error {
	elems, err := desc.Elements()
	if err != nil || len(elems) != 1 {
		return fmt.Errorf("entity %s must have exactly one key", docJSON(desc))
	}
	kind := elems[0].Key()
	spec, err := docValue(elems[0].Value(), kind)
	if err != nil {
		return err
	}
	create, ok := entityCreators[kind]
	if !ok {
		return fmt.Errorf("unknown entity type %q", kind)
	}
	return create(tr, ctx, lookupString(spec, "id"), spec)
}

func (tr *testRun) createClientEntity(ctx context.Context, id string, spec bson.Raw) error {
	c, err := tr.createClient(ctx, spec)
	if err != nil {
		return err
	}
	if err := tr.entities.add(id, c); err != nil {
		_ = c.client.Disconnect(ctx)
		return err
	}
	return nil
}

func (tr *testRun) createDatabaseEntity(_ context.Context, id string, spec bson.Raw) error {
	c, err := lookup[*clientEntity](tr.entities, lookupString(spec, "client"))
	if err != nil {
		return err
	}
	opts, err := collectionOrDatabaseOptions(spec.Lookup("databaseOptions"))
	if err != nil {
		return err
	}
	return tr.entities.add(id, &databaseEntity{client: c, db: c.client.Database(lookupString(spec, "databaseName"), opts)})
}

func (tr *testRun) createCollectionEntity(_ context.Context, id string, spec bson.Raw) error {
	db, err := lookup[*databaseEntity](tr.entities, lookupString(spec, "database"))
	if err != nil {
		return err
	}
	opts, err := collectionOrDatabaseOptions(spec.Lookup("collectionOptions"))
	if err != nil {
		return err
	}
	return tr.entities.add(id, &collectionEntity{client: db.client, coll: db.db.Collection(lookupString(spec, "collectionName"), opts)})
}

func (tr *testRun) createSessionEntity(ctx context.Context, id string, spec bson.Raw) error {
	c, err := lookup[*clientEntity](tr.entities, lookupString(spec, "client"))
	if err != nil {
		return err
	}
	var sopts sturdy.SessionOptions
	if so, ok := spec.Lookup("sessionOptions").DocumentOK(); ok {
		if err := tr.sessionOptions(so, &sopts); err != nil {
			return err
		}
	}
	s, err := c.client.StartSession(ctx, &sopts)
	if err != nil {
		return fmt.Errorf("starting session %q: %w", id, err)
	}
	return tr.entities.add(id, &sessionEntity{client: c, sess: s})
}

// sessionOptions reads a session entity's sessionOptions into o.
func (tr *testRun) sessionOptions(so bson.Raw, o *sturdy.SessionOptions) error {
	elems, _ := so.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "causalConsistency":
			cc := e.Value().Boolean()
			o.CausalConsistency = &cc
		case "defaultTimeoutMS":
			n, _ := asInt(e.Value())
			d := time.Duration(n) * time.Millisecond
			o.DefaultTimeout = &d
		case "snapshot":
			o.Snapshot = e.Value().Boolean()
		case "snapshotTime":
			t, err := tr.snapshotTime(e.Value().StringValue())
			if err != nil {
				return err
			}
			o.SnapshotTime = t
		case "defaultTransactionOptions":
			d, err := docValue(e.Value(), "defaultTransactionOptions")
			if err != nil {
				return err
			}
			if o.DefaultTransactionOptions, err = transactionOptions(d, nil); err != nil {
				return err
			}
		default:
			return unsupportedf("session option %q", e.Key())
		}
	}
	return nil
}

// snapshotTime is the timestamp saved as entity id from getSnapshotTime.
func (tr *testRun) snapshotTime(id string) (*bson.Timestamp, error) {
	v, err := tr.entities.value(id)
	if err != nil {
		return nil, err
	}
	t, i, ok := v.TimestampOK()
	if !ok {
		return nil, fmt.Errorf("session option snapshotTime: entity %q is not a timestamp", id)
	}
	return &bson.Timestamp{T: t, I: i}, nil
}

func lookupString(d bson.Raw, key string) string {
	s, _ := d.Lookup(key).StringValueOK()
	return s
}

// createClient builds a client entity: the runner's URI plus the entity's
// uriOptions plus SPEC_CLIENT_DEFAULTS for options the entity does not set.
func (tr *testRun) createClient(ctx context.Context, spec bson.Raw) (*clientEntity, error) {
	rec := newRecorder()
	uriOpts, multiMongos, err := readClientSpec(spec, rec)
	if err != nil {
		return nil, err
	}
	uri, err := buildURI(tr.clientBaseURI(multiMongos), uriOpts, tr.r.cfg.ClientDefaults)
	if err != nil {
		return nil, err
	}
	o, err := sturdy.ParseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", lookupString(spec, "id"), err)
	}
	o.Monitor = rec.monitor()
	c, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("connecting client %s: %w", lookupString(spec, "id"), err)
	}
	return &clientEntity{id: lookupString(spec, "id"), client: c, rec: rec}, nil
}

// readClientSpec reads a client entity's description: the URI options it
// sets and whether it may use several mongoses; what it observes goes
// into rec.
func readClientSpec(spec bson.Raw, rec *recorder) (uriOpts map[string]string, multiMongos bool, _ error) {
	elems, _ := spec.Elements()
	uriOpts = map[string]string{}
	for _, e := range elems {
		var err error
		switch e.Key() {
		case "id":
		case "uriOptions":
			err = readURIOptions(e.Value(), uriOpts)
		case "useMultipleMongoses":
			multiMongos = e.Value().Boolean()
		case "observeEvents":
			err = observeEvents(e.Value(), rec)
		case "ignoreCommandMonitoringEvents":
			a, _ := e.Value().ArrayOK()
			vals, _ := a.Values()
			for _, v := range vals {
				rec.ignoreCommands[strings.ToLower(v.StringValue())] = true
			}
		case "observeSensitiveCommands":
			rec.observeSensitive = e.Value().Boolean()
		case "awaitMinPoolSizeMS":
			// Pools are filled in the background; nothing to wait for
			// unless minPoolSize is set, which the runner does not wait on.
		default:
			err = unsupportedClientField(e.Key())
		}
		if err != nil {
			return nil, false, err
		}
	}
	return uriOpts, multiMongos, nil
}

// unsupportedClientFields are the client entity fields the runner does not
// support, with what they need.
var unsupportedClientFields = map[string]string{
	"storeEventsAsEntities":  "storeEventsAsEntities",
	"observeLogMessages":     "log message assertions (observeLogMessages): sturdy logs through log/slog without the logging specification's structured messages",
	"serverApi":              "the Stable API (serverApi)",
	"autoEncryptOpts":        "automatic encryption",
	"observeTracingMessages": "tracing",
}

// unsupportedClientField is the error of a client entity field the runner
// does not handle.
func unsupportedClientField(key string) error {
	if what, ok := unsupportedClientFields[key]; ok {
		return unsupportedf("%s", what)
	}
	return fmt.Errorf("unknown client entity field %q", key)
}

// readURIOptions adds a client entity's uriOptions to opts.
func readURIOptions(v bson.RawValue, opts map[string]string) error {
	d, err := docValue(v, "uriOptions")
	if err != nil {
		return err
	}
	elems, _ := d.Elements()
	for _, o := range elems {
		s, err := uriOptionString(o.Key(), o.Value())
		if err != nil {
			return err
		}
		opts[o.Key()] = s
	}
	return nil
}

// observeEvents makes rec observe the events a client entity's
// observeEvents names.
func observeEvents(v bson.RawValue, rec *recorder) error {
	a, ok := v.ArrayOK()
	if !ok {
		return errors.New("observeEvents must be an array")
	}
	vals, _ := a.Values()
	for _, v := range vals {
		name := v.StringValue()
		if !knownEventNames[name] {
			return unsupportedf("observing %s", name)
		}
		rec.observe[name] = true
	}
	return nil
}

// clientBaseURI is the connection string a client entity starts from.
func (tr *testRun) clientBaseURI(multiMongos bool) string {
	base := tr.r.cfg.URI
	if tr.r.topology == "load-balanced" && multiMongos && tr.r.cfg.MultiURI != "" {
		base = tr.r.cfg.MultiURI
	}
	if tr.r.topology == "sharded" && !multiMongos {
		// useMultipleMongoses absent or false: the client must reach one
		// mongos only, so that fail points set through it apply to every
		// command it sends.
		if hosts := uriHosts(base); len(hosts) > 1 {
			base = withHosts(base, hosts[:1])
		}
	}
	return base
}

// uriOptionString renders a uriOptions value for a connection string.
func uriOptionString(key string, v bson.RawValue) (string, error) {
	if _, _, ok := operatorOf(v); ok {
		return "", unsupportedf("$$placeholder URI option %q", key)
	}
	switch v.Type {
	case bson.TypeString:
		return v.StringValue(), nil
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean()), nil
	case bson.TypeInt32, bson.TypeInt64:
		n, _ := asInt(v)
		return strconv.FormatInt(n, 10), nil
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'f', -1, 64), nil
	case bson.TypeEmbeddedDocument:
		// authMechanismProperties: key:value pairs.
		elems, _ := v.Document().Elements()
		var parts []string
		for _, e := range elems {
			s, err := uriOptionString(e.Key(), e.Value())
			if err != nil {
				return "", err
			}
			parts = append(parts, e.Key()+":"+s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", unsupportedf("URI option %q of type %s", key, v.Type)
}

// buildURI adds options to a connection string: entity options override the
// base URI's, and defaults (a query string such as "retryWrites=true&
// heartbeatFrequencyMS=500") apply only to options neither sets. Option
// names compare case-insensitively, as in connection strings.
func buildURI(base string, entity map[string]string, defaults string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("runner URI: %w", err)
	}
	type kv struct{ k, v string }
	var opts []kv
	index := map[string]int{}
	set := func(k, v string, override bool) {
		if i, ok := index[strings.ToLower(k)]; ok {
			if override {
				opts[i] = kv{k, v}
			}
			return
		}
		index[strings.ToLower(k)] = len(opts)
		opts = append(opts, kv{k, v})
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", fmt.Errorf("runner URI options: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		set(k, q.Get(k), true)
	}
	for _, k := range slices.Sorted(maps.Keys(entity)) {
		set(k, entity[k], true)
	}
	if defaults != "" {
		dq, err := url.ParseQuery(defaults)
		if err != nil {
			return "", fmt.Errorf("SPEC_CLIENT_DEFAULTS: %w", err)
		}
		for _, k := range slices.Sorted(maps.Keys(dq)) {
			set(k, dq.Get(k), false)
		}
	}
	// directConnection=true needs a single seed and no replicaSet option.
	if i, ok := index["directconnection"]; ok && opts[i].v == "true" {
		if j, ok := index["replicaset"]; ok {
			opts = append(opts[:j], opts[j+1:]...)
		}
		if h := strings.Split(u.Host, ","); len(h) > 1 {
			u.Host = h[0]
		}
	}
	var parts []string
	for _, o := range opts {
		parts = append(parts, url.QueryEscape(o.k)+"="+url.QueryEscape(o.v))
	}
	u.RawQuery = strings.Join(parts, "&")
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

// collectionOrDatabaseOptions converts a collectionOrDatabaseOptions
// document (absent: nil).
func collectionOrDatabaseOptions(v bson.RawValue) (*sturdy.DatabaseOptions, error) {
	if v.Type == 0 {
		return nil, nil
	}
	d, err := docValue(v, "collection/database options")
	if err != nil {
		return nil, err
	}
	o := &sturdy.DatabaseOptions{}
	elems, _ := d.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "readConcern":
			rc, err := docValue(e.Value(), "readConcern")
			if err != nil {
				return nil, err
			}
			o.ReadConcernLevel = lookupString(rc, "level")
		case "readPreference":
			rp, err := readPreference(e.Value())
			if err != nil {
				return nil, err
			}
			o.ReadPreference = rp
		case "writeConcern":
			wc, err := writeConcern(e.Value())
			if err != nil {
				return nil, err
			}
			o.WriteConcern = wc
		case "timeoutMS":
			n, _ := asInt(e.Value())
			d := time.Duration(n) * time.Millisecond
			o.Timeout = &d
		default:
			return nil, fmt.Errorf("unknown collection/database option %q", e.Key())
		}
	}
	return o, nil
}

func readPreference(v bson.RawValue) (*sturdy.ReadPreference, error) {
	d, err := docValue(v, "readPreference")
	if err != nil {
		return nil, err
	}
	mode, err := sturdy.ParseReadMode(lookupString(d, "mode"))
	if err != nil {
		return nil, err
	}
	rp := &sturdy.ReadPreference{Mode: mode}
	if ts, ok := d.Lookup("tagSets").ArrayOK(); ok {
		vals, _ := ts.Values()
		for _, t := range vals {
			set := sturdy.TagSet{}
			elems, _ := t.Document().Elements()
			for _, e := range elems {
				set[e.Key()] = e.Value().StringValue()
			}
			rp.TagSets = append(rp.TagSets, set)
		}
	}
	if ms, ok := asInt(d.Lookup("maxStalenessSeconds")); ok && ms > 0 {
		rp.MaxStaleness = time.Duration(ms) * time.Second
	}
	if d.Lookup("hedge").Type != 0 {
		return nil, unsupportedf("hedged reads")
	}
	return rp, nil
}

func writeConcern(v bson.RawValue) (*sturdy.WriteConcern, error) {
	d, err := docValue(v, "writeConcern")
	if err != nil {
		return nil, err
	}
	wc := &sturdy.WriteConcern{}
	elems, _ := d.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "w":
			if n, ok := asInt(e.Value()); ok {
				wc.W = int(n)
			} else {
				wc.W = e.Value().StringValue()
			}
		case "wtimeoutMS":
			n, _ := asInt(e.Value())
			wc.WTimeout = time.Duration(n) * time.Millisecond
		case "journal":
			j := e.Value().Boolean()
			wc.Journal = &j
		default:
			return nil, fmt.Errorf("unknown write concern field %q", e.Key())
		}
	}
	return wc, nil
}

// uriHosts returns the hosts of a mongodb:// connection string.
func uriHosts(uri string) []string {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return nil
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return strings.Split(rest, ",")
}

// withHosts replaces the hosts of a mongodb:// connection string.
func withHosts(uri string, hosts []string) string {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return uri
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		end = i
	}
	start := strings.LastIndex(rest[:end], "@") + 1
	return "mongodb://" + rest[:start] + strings.Join(hosts, ",") + rest[end:]
}
