package spectest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// transactionOptions reads TransactionOptions from a document (the
// arguments of startTransaction/withTransaction, or a session's
// defaultTransactionOptions), marking the keys used in a when a is given.
func transactionOptions(d bson.Raw, a *args) (*sturdy.TransactionOptions, error) {
	get := func(k string) (bson.RawValue, bool) {
		if a != nil {
			return a.get(k)
		}
		v, err := d.LookupErr(k)
		return v, err == nil
	}
	o := &sturdy.TransactionOptions{}
	if v, ok := get("readConcern"); ok {
		rc, err := docValue(v, "readConcern")
		if err != nil {
			return nil, err
		}
		o.ReadConcernLevel = lookupString(rc, "level")
	}
	if v, ok := get("writeConcern"); ok {
		wc, err := writeConcern(v)
		if err != nil {
			return nil, err
		}
		o.WriteConcern = wc
	}
	if v, ok := get("readPreference"); ok {
		rp, err := readPreference(v)
		if err != nil {
			return nil, err
		}
		o.ReadPreference = rp
	}
	if v, ok := get("maxCommitTimeMS"); ok {
		n, _ := asInt(v)
		o.MaxCommitTime = time.Duration(n) * time.Millisecond
	}
	if a == nil {
		elems, _ := d.Elements()
		for _, e := range elems {
			switch e.Key() {
			case "readConcern", "writeConcern", "readPreference", "maxCommitTimeMS":
			default:
				return nil, unsupportedf("transaction option %q", e.Key())
			}
		}
	}
	return o, nil
}

// sessionOperations are the operations on a session entity.
var sessionOperations = opTable[*sessionEntity]{
	"endSession":        endSession,
	"getSnapshotTime":   getSnapshotTime,
	"startTransaction":  startTransaction,
	"commitTransaction": commitTransaction,
	"abortTransaction":  abortTransaction,
}

// withTransaction runs operations, which are dispatched through
// sessionOperations: added in init, as a reference in the table's
// initializer would be an initialization cycle.
func init() { sessionOperations["withTransaction"] = withTransaction }

func endSession(ctx context.Context, e *sessionEntity, a *args) (opResult, error) {
	e.id()
	e.sess.EndSession(ctx)
	e.ended = true
	return opResult{}, a.check()
}

func getSnapshotTime(_ context.Context, e *sessionEntity, a *args) (opResult, error) {
	ts, ok := e.sess.SnapshotTime()
	if !ok {
		return opResult{}, errors.New("getSnapshotTime: the session has no snapshot time")
	}
	v, err := toRawValue(ts)
	if err != nil {
		return opResult{}, err
	}
	return opResult{v: v}, a.check()
}

func startTransaction(_ context.Context, e *sessionEntity, a *args) (opResult, error) {
	o, err := transactionOptions(a.d, a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.sess.StartTransaction(o) })
}

func commitTransaction(ctx context.Context, e *sessionEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) {
		err := e.sess.CommitTransaction(ctx)
		e.id()
		return opResult{}, err
	})
}

func abortTransaction(ctx context.Context, e *sessionEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) {
		err := e.sess.AbortTransaction(ctx)
		e.id()
		return opResult{}, err
	})
}

// withTransaction runs the callback's operations in the session's
// convenient transaction API.
func withTransaction(ctx context.Context, e *sessionEntity, a *args) (opResult, error) {
	v, _ := a.get("callback")
	arr, ok := v.ArrayOK()
	if !ok {
		return opResult{}, &runnerError{errors.New("withTransaction: callback must be an array of operations")}
	}
	ops, _ := arr.Values()
	o, err := transactionOptions(a.d, a)
	if err != nil {
		return opResult{}, err
	}
	var failed error // an assertion of a callback operation failed
	res, err := checked(a, func() (opResult, error) {
		return opResult{}, e.sess.WithTransaction(ctx, func(ctx context.Context) error {
			for _, ov := range ops {
				opDoc, ok := ov.DocumentOK()
				if !ok {
					failed = errors.New("withTransaction: callback operation is not a document")
					return failed
				}
				driverErr, err := a.tr.runOperationErr(ctx, opDoc)
				if err != nil {
					failed = fmt.Errorf("callback operation %s: %w", lookupString(opDoc, "name"), err)
					return failed
				}
				if driverErr != nil {
					return driverErr
				}
			}
			return nil
		}, o)
	})
	e.id()
	if failed != nil {
		return opResult{}, &runnerError{failed}
	}
	return res, err
}
