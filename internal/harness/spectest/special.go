package spectest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/internal/testhook"
)

// special runs a testRunner operation.
func (tr *testRun) special(ctx context.Context, name string, a *args) error {
	switch name {
	case "failPoint":
		c, err := lookup[*clientEntity](tr.entities, a.str("client"))
		if err != nil {
			return err
		}
		fp, err := a.doc("failPoint")
		if err != nil || fp == nil {
			return fmt.Errorf("failPoint argument: %v", err)
		}
		if _, err := c.client.Database("admin").RunCommand(ctx, fp); err != nil {
			return fmt.Errorf("configureFailPoint: %w", err)
		}
		tr.failPoints = append(tr.failPoints, bson.D{{Key: "configureFailPoint", Value: lookupString(fp, "configureFailPoint")}, {Key: "mode", Value: "off"}})
		return a.check()
	case "targetedFailPoint":
		// Sets the fail point on the mongos the session is pinned to,
		// through the runner's direct client to that mongos.
		s, err := lookup[*sessionEntity](tr.entities, a.str("session"))
		if err != nil {
			return err
		}
		fp, err := a.doc("failPoint")
		if err != nil || fp == nil {
			return fmt.Errorf("failPoint argument: %v", err)
		}
		addr := s.sess.PinnedServer()
		if addr == "" {
			return errors.New("targetedFailPoint: the session is not pinned to a mongos")
		}
		var target *sturdy.Client
		for i, h := range tr.r.mongosAddrs {
			if sameAddr(h, addr) {
				target = tr.r.mongoses[i]
			}
		}
		if target == nil {
			return fmt.Errorf("targetedFailPoint: the session is pinned to %s, which is not one of the mongoses %v", addr, tr.r.mongosAddrs)
		}
		if _, err := target.Database("admin").RunCommand(ctx, fp); err != nil {
			return fmt.Errorf("configureFailPoint on %s: %w", addr, err)
		}
		tr.failPoints = append(tr.failPoints, bson.D{{Key: "configureFailPoint", Value: lookupString(fp, "configureFailPoint")}, {Key: "mode", Value: "off"}})
		return a.check()
	case "createEntities":
		v, _ := a.get("entities")
		arr, ok := v.ArrayOK()
		if !ok {
			return errors.New("createEntities: entities must be an array")
		}
		vals, _ := arr.Values()
		for _, ev := range vals {
			d, err := docValue(ev, "entity")
			if err != nil {
				return err
			}
			if err := tr.createEntity(ctx, d); err != nil {
				return err
			}
		}
		return nil
	case "assertSessionDirty", "assertSessionNotDirty":
		s, err := lookup[*sessionEntity](tr.entities, a.str("session"))
		if err != nil {
			return err
		}
		want := name == "assertSessionDirty"
		if got := testhook.SessionDirty(s.sess); got != want {
			return fmt.Errorf("%s: session dirty is %v", name, got)
		}
		return nil
	case "assertSameLsidOnLastTwoCommands", "assertDifferentLsidOnLastTwoCommands":
		c, err := lookup[*clientEntity](tr.entities, a.str("client"))
		if err != nil {
			return err
		}
		evs, _ := c.rec.snapshot()
		var started []*observed
		for _, o := range evs {
			if o.started != nil {
				started = append(started, o)
			}
		}
		if len(started) < 2 {
			return fmt.Errorf("%s: %d command started events observed, need 2", name, len(started))
		}
		x, y := started[len(started)-2].started.Command.Lookup("lsid"), started[len(started)-1].started.Command.Lookup("lsid")
		if x.Type == 0 || y.Type == 0 {
			return fmt.Errorf("%s: a command has no lsid", name)
		}
		same := bytes.Equal(x.Value, y.Value)
		if same != (name == "assertSameLsidOnLastTwoCommands") {
			return fmt.Errorf("%s: lsids %s and %s", name, shortJSON(x), shortJSON(y))
		}
		return nil
	case "assertCollectionExists", "assertCollectionNotExists":
		dbName, collName := a.str("databaseName"), a.str("collectionName")
		names, err := tr.r.internal.Database(dbName).ListCollectionNames(ctx, bson.D{{Key: "name", Value: collName}})
		if err != nil {
			return err
		}
		exists := slices.Contains(names, collName)
		if exists != (name == "assertCollectionExists") {
			return fmt.Errorf("%s: %s.%s exists: %v", name, dbName, collName, exists)
		}
		return nil
	case "assertIndexExists", "assertIndexNotExists":
		dbName, collName, index := a.str("databaseName"), a.str("collectionName"), a.str("indexName")
		exists := false
		cur, err := tr.r.internal.Database(dbName).Collection(collName).ListIndexes(ctx)
		var ce *sturdy.CommandError
		switch {
		case err == nil:
			var all []bson.Raw
			if err := cur.All(ctx, &all); err != nil {
				return err
			}
			for _, d := range all {
				if lookupString(d, "name") == index {
					exists = true
				}
			}
		case errors.As(err, &ce) && ce.Code == 26:
		default:
			return err
		}
		if exists != (name == "assertIndexExists") {
			return fmt.Errorf("%s: index %s on %s.%s exists: %v", name, index, dbName, collName, exists)
		}
		return nil
	case "waitForEvent", "assertEventCount":
		c, err := lookup[*clientEntity](tr.entities, a.str("client"))
		if err != nil {
			return err
		}
		ev, err := a.doc("event")
		if err != nil || ev == nil {
			return fmt.Errorf("%s: event argument: %v", name, err)
		}
		want := int(a.int64("count"))
		count := func() (int, <-chan struct{}, error) {
			evs, next := c.rec.snapshot()
			n := 0
			for _, o := range evs {
				if err := tr.m.matchEvent(ev, o); err == nil {
					n++
				} else {
					var ue *unsupportedError
					if errors.As(err, &ue) {
						return 0, nil, err
					}
				}
			}
			return n, next, nil
		}
		if name == "assertEventCount" {
			n, _, err := count()
			if err != nil {
				return err
			}
			if n != want {
				return fmt.Errorf("assertEventCount: %d matching events, want %d", n, want)
			}
			return nil
		}
		deadline := time.NewTimer(10 * time.Second)
		defer deadline.Stop()
		for {
			n, next, err := count()
			if err != nil {
				return err
			}
			if n >= want {
				return nil
			}
			select {
			case <-next:
			case <-deadline.C:
				return fmt.Errorf("waitForEvent: %d of %d %s events after 10s", n, want, firstKey(ev))
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	case "assertNumberConnectionsCheckedOut":
		c, err := lookup[*clientEntity](tr.entities, a.str("client"))
		if err != nil {
			return err
		}
		want := int(a.int64("connections"))
		c.rec.mu.Lock()
		got := c.rec.checkedOut
		c.rec.mu.Unlock()
		if got != want {
			return fmt.Errorf("assertNumberConnectionsCheckedOut: %d checked out, want %d", got, want)
		}
		return nil
	case "wait":
		select {
		case <-time.After(time.Duration(a.int64("ms")) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case "assertSessionTransactionState":
		s, err := lookup[*sessionEntity](tr.entities, a.str("session"))
		if err != nil {
			return err
		}
		if got, want := s.sess.TransactionState().String(), a.str("state"); got != want {
			return fmt.Errorf("assertSessionTransactionState: state %s, want %s", got, want)
		}
		return a.check()
	case "assertSessionPinned", "assertSessionUnpinned":
		s, err := lookup[*sessionEntity](tr.entities, a.str("session"))
		if err != nil {
			return err
		}
		// A sharded transaction pins a mongos; in load-balanced mode it
		// pins a connection.
		pinned := s.sess.PinnedServer() != "" || s.sess.PinnedConnection()
		if want := name == "assertSessionPinned"; pinned != want {
			return fmt.Errorf("%s: the session is pinned to %q (connection pinned: %v)", name, s.sess.PinnedServer(), s.sess.PinnedConnection())
		}
		return a.check()
	case "runOnThread", "waitForThread":
		return unsupportedf("%s (thread entities)", name)
	case "recordTopologyDescription", "assertTopologyType", "waitForPrimaryChange":
		return unsupportedf("%s (topology description entities)", name)
	}
	return fmt.Errorf("unknown testRunner operation %q", name)
}

// sameAddr compares two host:port addresses, ignoring case.
func sameAddr(a, b string) bool { return strings.EqualFold(a, b) }

// checkError checks an operation's error against an expectedError document.
func (tr *testRun) checkError(exp bson.Raw, err error) error {
	elems, _ := exp.Elements()
	var ce *sturdy.CommandError
	var we *sturdy.WriteException
	var bwe *sturdy.BulkWriteException
	var cbwe *sturdy.ClientBulkWriteException
	isCE, isWE, isBWE, isCBWE := errors.As(err, &ce), errors.As(err, &we), errors.As(err, &bwe), errors.As(err, &cbwe)
	// A bulk exception wrapping a network error (Err) is the client's;
	// one wrapping a server error is found as isCE or isWE.
	fromServer := isCE || isWE || isBWE && bwe.Err == nil || isCBWE && cbwe.Err == nil
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "isError":
		case "isClientError":
			if v.Boolean() == fromServer {
				return fmt.Errorf("isClientError %v, got %T: %v", v.Boolean(), err, err)
			}
		case "isTimeoutError":
			if v.Boolean() != sturdy.IsTimeout(err) {
				return fmt.Errorf("isTimeoutError %v, got %T: %v", v.Boolean(), err, err)
			}
		case "errorContains":
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(v.StringValue())) {
				return fmt.Errorf("errorContains %q, got %v", v.StringValue(), err)
			}
		case "errorCode":
			want, _ := asInt(v)
			codes := errorCodes(err)
			if !slices.Contains(codes, int32(want)) {
				return fmt.Errorf("errorCode %d, got codes %v from %T: %v", want, codes, err, err)
			}
		case "errorCodeName":
			if cerr := checkErrorCodeName(v, err); cerr != nil {
				return cerr
			}
		case "errorLabelsContain", "errorLabelsOmit":
			arr, _ := v.ArrayOK()
			labels, _ := arr.Values()
			for _, l := range labels {
				has := sturdy.HasErrorLabel(err, l.StringValue())
				if has != (e.Key() == "errorLabelsContain") {
					return fmt.Errorf("%s %s: label present is %v in %T: %v", e.Key(), l.StringValue(), has, err, err)
				}
			}
		case "errorResponse":
			var raw bson.Raw
			switch {
			case isCE:
				raw = ce.Raw
			case isWE:
				raw = we.Raw
			}
			if cerr := tr.checkErrorResponse(v, raw, err); cerr != nil {
				return cerr
			}
		case "expectResult":
			if merr := tr.m.matchRoot(v, partialResult(bwe, isBWE, cbwe, isCBWE)); merr != nil {
				return fmt.Errorf("expectError.expectResult: %w", merr)
			}
		case "writeErrors":
			if cerr := tr.checkClientWriteErrors(v, cbwe, isCBWE, err); cerr != nil {
				return cerr
			}
		case "writeConcernErrors":
			if cerr := tr.checkClientWriteConcernErrors(v, cbwe, isCBWE, err); cerr != nil {
				return cerr
			}
		default:
			return fmt.Errorf("unknown expectError field %q", e.Key())
		}
	}
	return nil
}

// partialResult is the result a bulk write exception carries, as
// expectError.expectResult matches it (the zero value if none).
func partialResult(bwe *sturdy.BulkWriteException, isBWE bool, cbwe *sturdy.ClientBulkWriteException, isCBWE bool) bson.RawValue {
	switch {
	case isCBWE && cbwe.PartialResult != nil:
		return mustRawValue(clientBulkResultDoc(cbwe.PartialResult))
	case isBWE && bwe.PartialResult != nil:
		return mustRawValue(bulkResultDoc(bwe.PartialResult))
	}
	return bson.RawValue{}
}

// checkErrorCodeName checks expectError.errorCodeName, case-insensitively.
func checkErrorCodeName(v bson.RawValue, err error) error {
	names := errorCodeNames(err)
	ok := false
	for _, n := range names {
		if strings.EqualFold(n, v.StringValue()) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("errorCodeName %q, got %v from %T: %v", v.StringValue(), names, err, err)
	}
	return nil
}

// checkErrorResponse matches expectError.errorResponse against raw, the
// server's reply the error carries (nil if none).
func (tr *testRun) checkErrorResponse(v bson.RawValue, raw bson.Raw, err error) error {
	if raw == nil {
		return fmt.Errorf("errorResponse: %T carries no server response: %v", err, err)
	}
	if merr := tr.m.matchRoot(v, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw}); merr != nil {
		return fmt.Errorf("errorResponse: %w\nactual: %s", merr, docJSON(raw))
	}
	return nil
}

// checkClientWriteErrors matches expectError.writeErrors, by index,
// against a client bulk write exception's write errors.
func (tr *testRun) checkClientWriteErrors(v bson.RawValue, cbwe *sturdy.ClientBulkWriteException, isCBWE bool, err error) error {
	if !isCBWE {
		return fmt.Errorf("expectError.writeErrors: %T is not a client bulk write exception: %v", err, err)
	}
	want, _ := v.DocumentOK()
	wantElems, _ := want.Elements()
	if len(wantElems) != len(cbwe.WriteErrors) {
		return fmt.Errorf("expectError.writeErrors: want %d, got %d: %v", len(wantElems), len(cbwe.WriteErrors), err)
	}
	for _, we := range wantElems {
		i, convErr := strconv.Atoi(we.Key())
		got, ok := cbwe.WriteErrors[i]
		if convErr != nil || !ok {
			return fmt.Errorf("expectError.writeErrors: no write error at index %s: %v", we.Key(), err)
		}
		actual := errorDoc(got.Code, got.Message, got.Details)
		if merr := tr.m.matchRoot(we.Value(), actual); merr != nil {
			return fmt.Errorf("expectError.writeErrors[%s]: %w", we.Key(), merr)
		}
	}
	return nil
}

// checkClientWriteConcernErrors matches expectError.writeConcernErrors,
// in order, against a client bulk write exception's.
func (tr *testRun) checkClientWriteConcernErrors(v bson.RawValue, cbwe *sturdy.ClientBulkWriteException, isCBWE bool, err error) error {
	if !isCBWE {
		return fmt.Errorf("expectError.writeConcernErrors: %T is not a client bulk write exception: %v", err, err)
	}
	want, _ := v.ArrayOK()
	wantVals, _ := want.Values()
	if len(wantVals) != len(cbwe.WriteConcernErrors) {
		return fmt.Errorf("expectError.writeConcernErrors: want %d, got %d: %v", len(wantVals), len(cbwe.WriteConcernErrors), err)
	}
	for i, wv := range wantVals {
		got := cbwe.WriteConcernErrors[i]
		actual := errorDoc(got.Code, got.Message, got.Details)
		if merr := tr.m.matchRoot(wv, actual); merr != nil {
			return fmt.Errorf("expectError.writeConcernErrors[%d]: %w", i, merr)
		}
	}
	return nil
}

// errorDoc is a write error or write concern error as the unified format
// matches it: {code, message, details}.
func errorDoc(code int32, message string, details bson.Raw) bson.RawValue {
	d := bson.D{{Key: "code", Value: code}, {Key: "message", Value: message}}
	if details != nil {
		d = append(d, bson.E{Key: "details", Value: details})
	}
	return mustRawValue(d)
}

// errorCodes lists every server error code err carries: the command error's,
// the write concern error's and each write error's.
func errorCodes(err error) []int32 {
	var out []int32
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		out = append(out, ce.Code)
	}
	var we *sturdy.WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil {
			out = append(out, we.WriteConcernError.Code)
		}
		for _, w := range we.WriteErrors {
			out = append(out, w.Code)
		}
	}
	var cbwe *sturdy.ClientBulkWriteException
	if errors.As(err, &cbwe) {
		for _, w := range cbwe.WriteConcernErrors {
			out = append(out, w.Code)
		}
		for _, w := range cbwe.WriteErrors {
			out = append(out, w.Code)
		}
	}
	var bwe *sturdy.BulkWriteException
	if errors.As(err, &bwe) {
		if bwe.WriteConcernError != nil {
			out = append(out, bwe.WriteConcernError.Code)
		}
		for _, w := range bwe.WriteErrors {
			out = append(out, w.Code)
		}
	}
	return out
}

func errorCodeNames(err error) []string {
	var out []string
	var ce *sturdy.CommandError
	if errors.As(err, &ce) {
		out = append(out, ce.Name)
	}
	codeName := func(raw bson.Raw) {
		if s := lookupString(raw, "codeName"); s != "" {
			out = append(out, s)
		}
	}
	var we *sturdy.WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil {
			out = append(out, we.WriteConcernError.Name)
		}
		for _, w := range we.WriteErrors {
			codeName(w.Raw)
		}
	}
	var cbwe *sturdy.ClientBulkWriteException
	if errors.As(err, &cbwe) {
		for _, w := range cbwe.WriteConcernErrors {
			out = append(out, w.Name)
		}
		for _, w := range cbwe.WriteErrors {
			codeName(w.Raw)
		}
	}
	var bwe *sturdy.BulkWriteException
	if errors.As(err, &bwe) {
		if bwe.WriteConcernError != nil {
			out = append(out, bwe.WriteConcernError.Name)
		}
		for _, w := range bwe.WriteErrors {
			codeName(w.Raw)
		}
	}
	return out
}
