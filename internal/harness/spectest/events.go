package spectest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/event"
)

// observed is one event a client entity recorded. name is the unified
// format's name for its type ("commandStartedEvent", "poolClearedEvent"...).
type observed struct {
	name      string
	started   *event.CommandStartedEvent
	succeeded *event.CommandSucceededEvent
	failed    *event.CommandFailedEvent
	pool      *event.PoolEvent
	server    *event.ServerDescriptionChangedEvent
	topology  *event.TopologyDescriptionChangedEvent
	heartbeat struct {
		awaited bool
	}
}

// category is the expectEvents eventType the event belongs to.
func (o *observed) category() string {
	switch {
	case o.started != nil, o.succeeded != nil, o.failed != nil:
		return "command"
	case o.pool != nil:
		return "cmap"
	}
	return "sdam"
}

// sensitiveCommands are the commands whose events are ignored unless a
// client sets observeSensitiveCommands (the command logging and monitoring
// specification's list).
var sensitiveCommands = map[string]bool{
	"authenticate": true, "saslstart": true, "saslcontinue": true, "getnonce": true,
	"createuser": true, "updateuser": true, "copydbgetnonce": true, "copydbsaslstart": true, "copydb": true,
}

// recorder collects the events a client entity observes. It is filled from
// the driver's goroutines, so it is guarded by a mutex.
type recorder struct {
	observe          map[string]bool // event names from observeEvents
	ignoreCommands   map[string]bool // lower-cased command names
	observeSensitive bool

	mu      sync.Mutex
	events  []*observed
	enabled bool
	// checkedOut counts connections checked out (ConnectionCheckedOut minus
	// ConnectionCheckedIn), for assertNumberConnectionsCheckedOut.
	checkedOut int
	// notify is closed and replaced whenever an event is recorded, to wake
	// waitForEvent.
	notify chan struct{}
}

func newRecorder() *recorder {
	return &recorder{observe: map[string]bool{}, ignoreCommands: map[string]bool{}, enabled: true, notify: make(chan struct{})}
}

// sensitive reports whether a command's events are to be ignored as
// sensitive: the listed commands, and hello/isMaster when the driver
// redacted them (they carried speculativeAuthenticate).
func (r *recorder) sensitive(name string, body bson.Raw) bool {
	if r.observeSensitive {
		return false
	}
	n := strings.ToLower(name)
	if sensitiveCommands[n] {
		return true
	}
	if n == "hello" || n == "ismaster" {
		return len(body) <= 5
	}
	return false
}

func (r *recorder) ignored(name string) bool {
	n := strings.ToLower(name)
	return n == "configurefailpoint" || r.ignoreCommands[n]
}

func (r *recorder) add(o *observed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.enabled || !r.observe[o.name] {
		return
	}
	r.events = append(r.events, o)
	close(r.notify)
	r.notify = make(chan struct{})
}

// snapshot returns the events recorded so far and a channel closed at the
// next one.
func (r *recorder) snapshot() ([]*observed, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*observed(nil), r.events...), r.notify
}

func (r *recorder) stop() {
	r.mu.Lock()
	r.enabled = false
	r.mu.Unlock()
}

// monitorState tracks command request ids whose started event was ignored
// as sensitive, so their succeeded/failed events are ignored too.
type monitorState struct {
	mu      sync.Mutex
	ignored map[int32]bool
}

// skip reports a command event r does not record: an ignored or sensitive
// command's. The started event decides for the succeeded or failed event
// of the same request (whose reply may not show the command sensitive).
func (st *monitorState) skip(r *recorder, reqID int32, name string, body bson.Raw, started bool) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if started {
		if r.ignored(name) || r.sensitive(name, body) {
			st.ignored[reqID] = true
			return true
		}
		return false
	}
	if st.ignored[reqID] {
		delete(st.ignored, reqID)
		return true
	}
	return r.ignored(name) || (body != nil && r.sensitive(name, body))
}

// heartbeat is an observed heartbeat event.
func heartbeat(name string, awaited bool) *observed {
	o := &observed{name: name}
	o.heartbeat.awaited = awaited
	return o
}

// monitor returns the event.Monitor a client entity is created with.
func (r *recorder) monitor() *event.Monitor {
	st := &monitorState{ignored: map[int32]bool{}}
	skip := func(reqID int32, name string, body bson.Raw, started bool) bool {
		return st.skip(r, reqID, name, body, started)
	}
	return &event.Monitor{
		CommandStarted: func(_ context.Context, e *event.CommandStartedEvent) {
			if skip(e.RequestID, e.CommandName, e.Command, true) {
				return
			}
			r.add(&observed{name: "commandStartedEvent", started: e})
		},
		CommandSucceeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if skip(e.RequestID, e.CommandName, e.Reply, false) {
				return
			}
			r.add(&observed{name: "commandSucceededEvent", succeeded: e})
		},
		CommandFailed: func(_ context.Context, e *event.CommandFailedEvent) {
			if skip(e.RequestID, e.CommandName, nil, false) {
				return
			}
			r.add(&observed{name: "commandFailedEvent", failed: e})
		},
		Pool: func(e *event.PoolEvent) {
			r.mu.Lock()
			switch e.Type {
			case event.ConnectionCheckedOut:
				r.checkedOut++
			case event.ConnectionCheckedIn:
				r.checkedOut--
			}
			r.mu.Unlock()
			r.add(&observed{name: poolEventName(e.Type), pool: e})
		},
		ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			r.add(&observed{name: "serverDescriptionChangedEvent", server: e})
		},
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			r.add(&observed{name: "topologyDescriptionChangedEvent", topology: e})
		},
		ServerHeartbeatStarted: func(e *event.ServerHeartbeatStartedEvent) { r.add(heartbeat("serverHeartbeatStartedEvent", e.Awaited)) },
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			r.add(heartbeat("serverHeartbeatSucceededEvent", e.Awaited))
		},
		ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) { r.add(heartbeat("serverHeartbeatFailedEvent", e.Awaited)) },
		TopologyOpening:       func(*event.TopologyOpeningEvent) { r.add(&observed{name: "topologyOpeningEvent"}) },
		TopologyClosed:        func(*event.TopologyClosedEvent) { r.add(&observed{name: "topologyClosedEvent"}) },
	}
}

func poolEventName(t event.PoolEventType) string {
	s := string(t)
	return strings.ToLower(s[:1]) + s[1:] + "Event"
}

// knownEventNames are the observeEvents values the runner can record.
var knownEventNames = map[string]bool{
	"commandStartedEvent": true, "commandSucceededEvent": true, "commandFailedEvent": true,
	"poolCreatedEvent": true, "poolReadyEvent": true, "poolClearedEvent": true, "poolClosedEvent": true,
	"connectionCreatedEvent": true, "connectionReadyEvent": true, "connectionClosedEvent": true,
	"connectionCheckOutStartedEvent": true, "connectionCheckOutFailedEvent": true,
	"connectionCheckedOutEvent": true, "connectionCheckedInEvent": true,
	"serverDescriptionChangedEvent": true, "topologyDescriptionChangedEvent": true,
	"serverHeartbeatStartedEvent": true, "serverHeartbeatSucceededEvent": true, "serverHeartbeatFailedEvent": true,
	"topologyOpeningEvent": true, "topologyClosedEvent": true,
}

// matchEvent checks one observed event against an expectedEvent document.
func (m *matcher) matchEvent(exp bson.Raw, o *observed) error {
	elems, err := exp.Elements()
	if err != nil || len(elems) != 1 {
		return fmt.Errorf("expected event %s must have exactly one key", docJSON(exp))
	}
	name := elems[0].Key()
	if name != o.name {
		return fmt.Errorf("expected %s, got %s", name, o.describe())
	}
	spec, ok := elems[0].Value().DocumentOK()
	if !ok {
		return fmt.Errorf("%s: assertions must be a document", name)
	}
	fields, _ := spec.Elements()
	for _, f := range fields {
		if err := m.matchEventField(name, f.Key(), f.Value(), o); err != nil {
			return fmt.Errorf("%s.%s: %w", name, f.Key(), err)
		}
	}
	return nil
}

// commandFields are the fields the command events share (and the service
// id, which pool events have too).
type commandFields struct {
	cmdName, dbName string
	serverConnID    *int64
	serviceID       *bson.ObjectID
}

// commandFields returns o's command fields (zero for other events).
func (o *observed) commandFields() commandFields {
	switch {
	case o.started != nil:
		return commandFields{o.started.CommandName, o.started.DatabaseName, o.started.ServerConnectionID, o.started.ServiceID}
	case o.succeeded != nil:
		return commandFields{o.succeeded.CommandName, o.succeeded.DatabaseName, o.succeeded.ServerConnectionID, o.succeeded.ServiceID}
	case o.failed != nil:
		return commandFields{o.failed.CommandName, o.failed.DatabaseName, o.failed.ServerConnectionID, o.failed.ServiceID}
	case o.pool != nil:
		return commandFields{serviceID: o.pool.ServiceID}
	}
	return commandFields{}
}

// wantString compares an expected string field with the event's.
func wantString(want bson.RawValue, got string) error {
	if w := want.StringValue(); w != got {
		return fmt.Errorf("expected %q, got %q", w, got)
	}
	return nil
}

// wantBool compares an expected boolean field with the event's.
func wantBool(want bson.RawValue, got bool) error {
	if w := want.Boolean(); w != got {
		return fmt.Errorf("expected %v, got %v", w, got)
	}
	return nil
}

func (m *matcher) matchEventField(name, key string, want bson.RawValue, o *observed) error {
	f := o.commandFields()
	switch key {
	case "command":
		if o.started == nil {
			break
		}
		return m.matchRoot(want, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: o.started.Command})
	case "reply":
		if o.succeeded == nil {
			break
		}
		return m.matchRoot(want, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: o.succeeded.Reply})
	case "commandName":
		return wantString(want, f.cmdName)
	case "databaseName":
		return wantString(want, f.dbName)
	case "hasServiceId":
		return wantBool(want, f.serviceID != nil)
	case "hasServerConnectionId":
		return wantBool(want, f.serverConnID != nil && *f.serverConnID > 0)
	case "interruptInUseConnections":
		if o.pool == nil {
			break
		}
		return wantBool(want, o.pool.Interruptible)
	case "reason":
		if o.pool == nil {
			break
		}
		return wantString(want, o.pool.Reason)
	case "awaited":
		return wantBool(want, o.heartbeat.awaited)
	case "previousDescription", "newDescription":
		return matchDescriptionType(key, want, o)
	}
	return unsupportedf("assertion %q on %s", key, name)
}

// matchDescriptionType checks the type of a server or topology description
// event's previousDescription or newDescription (key), the one field of
// them the tests assert.
func matchDescriptionType(key string, want bson.RawValue, o *observed) error {
	d, _ := want.DocumentOK()
	wantType := d.Lookup("type")
	if wantType.Type == 0 {
		return nil
	}
	var got string
	switch {
	case o.server != nil && key == "previousDescription":
		got = o.server.Previous.Kind
	case o.server != nil:
		got = o.server.New.Kind
	case o.topology != nil && key == "previousDescription":
		got = o.topology.Previous.Kind
	case o.topology != nil:
		got = o.topology.New.Kind
	default:
		return fmt.Errorf("not a description event")
	}
	if w := wantType.StringValue(); w != got {
		return fmt.Errorf("type: expected %q, got %q", w, got)
	}
	return nil
}

func (o *observed) describe() string {
	switch {
	case o.started != nil:
		return fmt.Sprintf("%s(%s %s)", o.name, o.started.CommandName, docJSON(o.started.Command))
	case o.succeeded != nil:
		return fmt.Sprintf("%s(%s)", o.name, o.succeeded.CommandName)
	case o.failed != nil:
		return fmt.Sprintf("%s(%s: %v)", o.name, o.failed.CommandName, o.failed.Failure)
	case o.pool != nil:
		return fmt.Sprintf("%s(%s)", o.name, o.pool.Reason)
	}
	return o.name
}

// matchEvents checks the events of one category against an
// expectedEventsForClient list, in order.
func (m *matcher) matchEvents(expected []bson.Raw, actual []*observed, ignoreExtra bool) error {
	if len(actual) < len(expected) || (!ignoreExtra && len(actual) != len(expected)) {
		return fmt.Errorf("expected %d events, observed %d:\n%s", len(expected), len(actual), listEvents(actual))
	}
	for i, e := range expected {
		if err := m.matchEvent(e, actual[i]); err != nil {
			return fmt.Errorf("event %d: %w\nobserved:\n%s", i, err, listEvents(actual))
		}
	}
	return nil
}

func listEvents(evs []*observed) string {
	var b strings.Builder
	for i, o := range evs {
		fmt.Fprintf(&b, "  %d: %s\n", i, o.describe())
	}
	return b.String()
}
