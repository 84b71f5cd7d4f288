package once

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// Outcome says what a failed Increment left behind.
type Outcome int

const (
	// NotApplied: step one did not record the token, so nothing will be
	// counted. Calling Increment again for the same event is safe.
	NotApplied Outcome = iota
	// Unknown: step one may have recorded the token (its reply was lost).
	// If it did, Reconcile counts it exactly once. Do not call Increment
	// again for the same event: that could count it twice.
	Unknown
	// Pending: step one recorded the token but step two did not complete.
	// Reconcile counts it exactly once.
	Pending
)

func (o Outcome) String() string {
	switch o {
	case NotApplied:
		return "not applied"
	case Unknown:
		return "unknown (Reconcile settles it)"
	case Pending:
		return "pending (Reconcile applies it)"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// IncrementError is the error of a failed Increment.
type IncrementError struct {
	ID      any           // the document's _id
	Token   bson.ObjectID // the increment's token
	Step    int           // 1 (record the token) or 2 (apply it)
	Outcome Outcome
	Err     error // the last error
}

func (e *IncrementError) Error() string {
	return fmt.Sprintf("once: increment of %v failed in step %d (%s): %v", e.ID, e.Step, e.Outcome, e.Err)
}

func (e *IncrementError) Unwrap() error { return e.Err }

// IncrementResult is the result of a successful Increment.
type IncrementResult struct {
	Token bson.ObjectID // the token that carried the increment
	// Upserted is true when step one created the document.
	Upserted bool
	// AlreadyApplied is true when step two matched nothing because the
	// token had been applied already: by Reconcile, or by a first attempt
	// whose reply was lost.
	AlreadyApplied bool
	// Retries counts the attempts beyond the first, over both steps.
	Retries int
}

// increment is one parsed Increment: the $inc operand and its record.
type increment struct {
	inc   bson.D // {field: amount, ...} for $inc
	pairs bson.A // [{f: field, n: amount}, ...] as stored in a pending entry
}

// parseIncrement validates the fields of an Increment: a non-empty document
// of field paths to int32, int64 or double amounts, none touching _id or
// the fields this package keeps its state in.
func (c *Collection) parseIncrement(fields any) (increment, error) {
	var inc increment
	if fields == nil {
		return inc, fmt.Errorf("%w: no fields", ErrInvalidIncrement)
	}
	b, err := bson.Marshal(fields)
	if err != nil {
		return inc, fmt.Errorf("%w: cannot marshal %T: %v", ErrInvalidIncrement, fields, err)
	}
	elems, err := bson.Raw(b).Elements()
	if err != nil {
		return inc, fmt.Errorf("%w: %v", ErrInvalidIncrement, err)
	}
	if len(elems) == 0 {
		return inc, fmt.Errorf("%w: no fields", ErrInvalidIncrement)
	}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if err := c.checkField(k); err != nil {
			return inc, err
		}
		switch v.Type {
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		default:
			return inc, fmt.Errorf("%w: amount of %q is a %s; want int32, int64 or double", ErrInvalidIncrement, k, v.Type)
		}
		inc.inc = append(inc.inc, bson.E{Key: k, Value: v})
		inc.pairs = append(inc.pairs, bson.D{{Key: "f", Value: k}, {Key: "n", Value: v}})
	}
	return inc, nil
}

func (c *Collection) checkField(k string) error {
	if k == "" || strings.HasPrefix(k, "$") || strings.Contains(k, "..") || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") {
		return fmt.Errorf("%w: bad field name %q", ErrInvalidIncrement, k)
	}
	for _, reserved := range []string{"_id", c.pending, c.cutoff} {
		if k == reserved || strings.HasPrefix(k, reserved+".") || strings.HasPrefix(reserved, k+".") {
			return fmt.Errorf("%w: field %q overlaps %q", ErrInvalidIncrement, k, reserved)
		}
	}
	return nil
}

// Increment adds the amounts in fields (a document such as
// bson.D{{Key: "counter", Value: 1}}, like the operand of $inc) to the
// document with _id id exactly once, creating the document if needed.
//
// Step one records a fresh token and the amounts in the pending array
// ($addToSet, upsert); step two, one update filtered on the _id and the
// token, $pull's the token and $inc's the fields. Both are idempotent and
// each is retried once on a transient error. It costs two round trips.
//
// On failure the *IncrementError says what was left behind: a token left in
// pending (Outcome Pending, or possibly Unknown) is applied exactly once by
// Reconcile, so run Reconcile periodically.
func (c *Collection) Increment(ctx context.Context, id any, fields any) (*IncrementResult, error) {
	inc, err := c.parseIncrement(fields)
	if err != nil {
		return nil, err
	}
	tok := c.newToken()
	res := &IncrementResult{Token: tok}
	fail := func(step int, o Outcome, err error) error {
		return &IncrementError{ID: id, Token: tok, Step: step, Outcome: o, Err: err}
	}

	upserted, retries, err := c.record(ctx, id, tok, inc)
	res.Upserted, res.Retries = upserted, retries
	if err != nil {
		return nil, err
	}

	// Step two.
	matched, retried2, err := c.settle(ctx, id, tok, inc.inc, false)
	if retried2 {
		res.Retries++
	}
	if err != nil {
		return nil, fail(2, Pending, err)
	}
	res.AlreadyApplied = !matched
	return res, nil
}

// record is step one: it adds the token and its amounts to the pending
// array, creating the document if needed. The filter refuses the token if
// Reconcile has folded a token at least as new; the upsert then collides
// with the existing document on _id. A duplicate _id can also be a
// concurrent upsert creating the document, so it is tried once more: the
// document exists by then, and only a refusal collides again.
func (c *Collection) record(ctx context.Context, id any, tok bson.ObjectID, inc increment) (upserted bool, retries int, err error) {
	fail := func(o Outcome, err error) error {
		return &IncrementError{ID: id, Token: tok, Step: 1, Outcome: o, Err: err}
	}
	filter := bson.D{{Key: "_id", Value: id}, {Key: c.cutoff, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: tok}}}}}}
	update := bson.D{{Key: "$addToSet", Value: bson.D{{Key: c.pending, Value: bson.D{{Key: "t", Value: tok}, {Key: "inc", Value: inc.pairs}}}}}}
	maybe, retried, dupRetried := false, false, false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			retries++
		}
		r, err := c.coll.UpdateOne(ctx, filter, update, &sturdy.UpdateOptions{Upsert: true})
		if err == nil {
			return r.UpsertedID != nil, retries, nil
		}
		switch {
		case isDuplicateID(err) && !dupRetried:
			dupRetried = true
			continue
		case isDuplicateID(err):
			return false, retries, fail(outcome(maybe), fmt.Errorf("%w: %w", ErrTokenRejected, err))
		}
		maybe = maybe || mayHaveApplied(err)
		if retried || !c.retryOn(err) || ctx.Err() != nil {
			return false, retries, fail(outcome(maybe), err)
		}
		retried = true
	}
}

func outcome(maybeApplied bool) Outcome {
	if maybeApplied {
		return Unknown
	}
	return NotApplied
}

// settle is step two, and Reconcile's fold of one token: a single update
// that finds the document by _id and token, pulls the token and increments
// the fields. It matches at most once per token, so it is safe to retry and
// to race. Reconcile (raiseCutoff) also raises the cutoff to the token in
// the same atomic update, so step one can never record it again.
func (c *Collection) settle(ctx context.Context, id any, tok bson.ObjectID, inc bson.D, raiseCutoff bool) (matched, retried bool, err error) {
	filter := bson.D{{Key: "_id", Value: id}, {Key: c.pending + ".t", Value: tok}}
	update := bson.D{
		{Key: "$pull", Value: bson.D{{Key: c.pending, Value: bson.D{{Key: "t", Value: tok}}}}},
		{Key: "$inc", Value: inc},
	}
	if raiseCutoff {
		update = append(update, bson.E{Key: "$max", Value: bson.D{{Key: c.cutoff, Value: tok}}})
	}
	var r *sturdy.UpdateResult
	retried, err = retry(ctx, c.retryOn, func(ctx context.Context) (err error) {
		r, err = c.coll.UpdateOne(ctx, filter, update)
		return err
	})
	if err != nil {
		return false, retried, err
	}
	return r.MatchedCount > 0, retried, nil
}
