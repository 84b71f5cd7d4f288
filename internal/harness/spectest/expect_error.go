package spectest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// checkError checks an operation's error against an expectedError document.
func (tr *testRun) checkError(exp bson.Raw, err error) error {
	e := newDriverError(err)
	elems, _ := exp.Elements()
	for _, el := range elems {
		check, ok := expectErrorChecks[el.Key()]
		if !ok {
			return fmt.Errorf("unknown expectError field %q", el.Key())
		}
		if cerr := check(tr, el.Key(), el.Value(), e); cerr != nil {
			return cerr
		}
	}
	return nil
}

// driverError is an operation's error and the driver errors it wraps (nil
// where it wraps none of that kind), as expectError checks them.
type driverError struct {
	err  error
	ce   *sturdy.CommandError
	we   *sturdy.WriteException
	bwe  *sturdy.BulkWriteException
	cbwe *sturdy.ClientBulkWriteException
}

func newDriverError(err error) *driverError {
	e := &driverError{err: err}
	errors.As(err, &e.ce)
	errors.As(err, &e.we)
	errors.As(err, &e.bwe)
	errors.As(err, &e.cbwe)
	return e
}

// fromServer reports an error the server returned. A bulk exception
// wrapping a network error (Err) is the client's; one wrapping a server
// error is found as a command error or write exception.
func (e *driverError) fromServer() bool {
	return e.ce != nil || e.we != nil || e.bwe != nil && e.bwe.Err == nil || e.cbwe != nil && e.cbwe.Err == nil
}

// expectErrorChecks check the fields of an expectedError document; key is
// the field, v its value.
var expectErrorChecks = map[string]func(tr *testRun, key string, v bson.RawValue, e *driverError) error{
	"isError":            (*testRun).checkIsError,
	"isClientError":      (*testRun).checkIsClientError,
	"isTimeoutError":     (*testRun).checkIsTimeoutError,
	"errorContains":      (*testRun).checkErrorContains,
	"errorCode":          (*testRun).checkErrorCode,
	"errorCodeName":      (*testRun).checkErrorCodeName,
	"errorLabelsContain": (*testRun).checkErrorLabels,
	"errorLabelsOmit":    (*testRun).checkErrorLabels,
	"errorResponse":      (*testRun).checkErrorResponse,
	"expectResult":       (*testRun).checkPartialResult,
	"writeErrors":        (*testRun).checkClientWriteErrors,
	"writeConcernErrors": (*testRun).checkClientWriteConcernErrors,
}

// checkIsError: that there is an error was checked before.
func (*testRun) checkIsError(string, bson.RawValue, *driverError) error { return nil }

func (*testRun) checkIsClientError(_ string, v bson.RawValue, e *driverError) error {
	if v.Boolean() == e.fromServer() {
		return fmt.Errorf("isClientError %v, got %T: %v", v.Boolean(), e.err, e.err)
	}
	return nil
}

func (*testRun) checkIsTimeoutError(_ string, v bson.RawValue, e *driverError) error {
	if v.Boolean() != sturdy.IsTimeout(e.err) {
		return fmt.Errorf("isTimeoutError %v, got %T: %v", v.Boolean(), e.err, e.err)
	}
	return nil
}

// checkErrorContains checks expectError.errorContains, case-insensitively.
func (*testRun) checkErrorContains(_ string, v bson.RawValue, e *driverError) error {
	if !strings.Contains(strings.ToLower(e.err.Error()), strings.ToLower(v.StringValue())) {
		return fmt.Errorf("errorContains %q, got %v", v.StringValue(), e.err)
	}
	return nil
}

func (*testRun) checkErrorCode(_ string, v bson.RawValue, e *driverError) error {
	want, _ := asInt(v)
	codes := errorCodes(e.err)
	if !slices.Contains(codes, int32(want)) {
		return fmt.Errorf("errorCode %d, got codes %v from %T: %v", want, codes, e.err, e.err)
	}
	return nil
}

// checkErrorCodeName checks expectError.errorCodeName, case-insensitively.
func (*testRun) checkErrorCodeName(_ string, v bson.RawValue, e *driverError) error {
	names := errorCodeNames(e.err)
	ok := false
	for _, n := range names {
		if strings.EqualFold(n, v.StringValue()) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("errorCodeName %q, got %v from %T: %v", v.StringValue(), names, e.err, e.err)
	}
	return nil
}

// checkErrorLabels checks errorLabelsContain and errorLabelsOmit (key).
func (*testRun) checkErrorLabels(key string, v bson.RawValue, e *driverError) error {
	arr, _ := v.ArrayOK()
	labels, _ := arr.Values()
	for _, l := range labels {
		has := sturdy.HasErrorLabel(e.err, l.StringValue())
		if has != (key == "errorLabelsContain") {
			return fmt.Errorf("%s %s: label present is %v in %T: %v", key, l.StringValue(), has, e.err, e.err)
		}
	}
	return nil
}

// checkErrorResponse matches expectError.errorResponse against the
// server's reply the error carries.
func (tr *testRun) checkErrorResponse(_ string, v bson.RawValue, e *driverError) error {
	var raw bson.Raw
	switch {
	case e.ce != nil:
		raw = e.ce.Raw
	case e.we != nil:
		raw = e.we.Raw
	}
	if raw == nil {
		return fmt.Errorf("errorResponse: %T carries no server response: %v", e.err, e.err)
	}
	if merr := tr.m.matchRoot(v, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw}); merr != nil {
		return fmt.Errorf("errorResponse: %w\nactual: %s", merr, docJSON(raw))
	}
	return nil
}

// checkPartialResult matches expectError.expectResult against the result
// a bulk write exception carries (nothing if none).
func (tr *testRun) checkPartialResult(_ string, v bson.RawValue, e *driverError) error {
	var partial bson.RawValue
	switch {
	case e.cbwe != nil && e.cbwe.PartialResult != nil:
		partial = mustRawValue(clientBulkResultDoc(e.cbwe.PartialResult))
	case e.bwe != nil && e.bwe.PartialResult != nil:
		partial = mustRawValue(bulkResultDoc(e.bwe.PartialResult))
	}
	if merr := tr.m.matchRoot(v, partial); merr != nil {
		return fmt.Errorf("expectError.expectResult: %w", merr)
	}
	return nil
}

// checkClientWriteErrors matches expectError.writeErrors, by index,
// against a client bulk write exception's write errors.
func (tr *testRun) checkClientWriteErrors(_ string, v bson.RawValue, e *driverError) error {
	cbwe := e.cbwe
	if cbwe == nil {
		return fmt.Errorf("expectError.writeErrors: %T is not a client bulk write exception: %v", e.err, e.err)
	}
	want, _ := v.DocumentOK()
	wantElems, _ := want.Elements()
	if len(wantElems) != len(cbwe.WriteErrors) {
		return fmt.Errorf("expectError.writeErrors: want %d, got %d: %v", len(wantElems), len(cbwe.WriteErrors), e.err)
	}
	for _, we := range wantElems {
		i, convErr := strconv.Atoi(we.Key())
		got, ok := cbwe.WriteErrors[i]
		if convErr != nil || !ok {
			return fmt.Errorf("expectError.writeErrors: no write error at index %s: %v", we.Key(), e.err)
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
func (tr *testRun) checkClientWriteConcernErrors(_ string, v bson.RawValue, e *driverError) error {
	cbwe := e.cbwe
	if cbwe == nil {
		return fmt.Errorf("expectError.writeConcernErrors: %T is not a client bulk write exception: %v", e.err, e.err)
	}
	want, _ := v.ArrayOK()
	wantVals, _ := want.Values()
	if len(wantVals) != len(cbwe.WriteConcernErrors) {
		return fmt.Errorf("expectError.writeConcernErrors: want %d, got %d: %v", len(wantVals), len(cbwe.WriteConcernErrors), e.err)
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
