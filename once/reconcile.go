package once

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// ReconcileMode selects how Reconcile folds tokens.
type ReconcileMode int

const (
	// PerToken (the default) folds one token per update, with the very
	// update of step two: filtered on _id and the token, it pulls the token
	// and increments the fields, and also raises the cutoff. It is correct
	// while incrementers and other reconcilers run.
	PerToken ReconcileMode = iota
	// SetUnset is the nightly pass of "How To Write Resilient MongoDB
	// Applications": read each document with pending tokens, add up the
	// amounts, and write the totals with one idempotent $set while $unset'ing
	// the folded tokens. The article requires the documents to be quiescent (no
	// increments in flight). sturdy adds a guard — the update is filtered on
	// the pending array and the field values it read — so a concurrent writer
	// makes the update miss (counted in Changed) instead of being
	// overwritten; but a busy document may be skipped every time, and the
	// raised cutoff can refuse in-flight increments with older tokens. Use it
	// on documents nobody is writing, such as yesterday's counters.
	SetUnset
)

// ReconcileOptions configures Reconcile. The zero value folds every
// pending token with the PerToken mode.
type ReconcileOptions struct {
	// Filter restricts the pass to matching documents (e.g. one day's
	// counters). Default nil: every document with pending tokens.
	Filter any
	// MinAge folds only tokens at least this old, judged by the timestamp
	// in the token (an ObjectID minted by the incrementer's clock). Younger
	// tokens probably belong to increments still in flight, which will
	// settle them themselves. Folding them early is still counted once, but
	// raises the cutoff past tokens whose step one has not arrived yet, and
	// those increments then fail with ErrTokenRejected. Choose an age well
	// above an Increment's duration plus clock skew, such as a few minutes.
	// Default 0: fold every token.
	MinAge time.Duration
	// Mode is PerToken (default) or SetUnset.
	Mode ReconcileMode
}

// ReconcileResult counts what a Reconcile pass did.
type ReconcileResult struct {
	Documents int // documents with pending tokens examined
	Folded    int // tokens this pass applied to their fields
	Gone      int // tokens settled by someone else before this pass reached them
	Young     int // tokens left alone because they are younger than MinAge
	Changed   int // SetUnset: documents skipped because they changed after being read
	Invalid   int // pending entries not written by this package, left alone
}

// Reconcile is the clean-up pass for increments whose step two never ran: it
// applies every leftover token in the pending arrays to its fields, exactly
// once. It is safe to run repeatedly and concurrently with other Reconcile
// passes and, in the PerToken mode, with incrementers: a token is applied by
// an update filtered on that token, so only one update — step two's or a
// reconciler's — can ever match it.
//
// One more race makes the cutoff necessary. Suppose step one's first
// attempt records a token but its reply is lost; Reconcile folds the token;
// then step one's retry arrives. $addToSet would record the token again and
// it would be counted twice. So the fold raises the document's cutoff field
// to the folded token in the same atomic update, and step one refuses any
// token at or below the cutoff (ErrTokenRejected). Tokens are ObjectIDs,
// which order by creation time, so the cutoff only refuses increments that
// minted their token before a token that was already folded.
//
// Each update is retried once on a transient error. On any other error the
// pass stops and returns it with the counts so far; running it again is
// safe. The caller chooses when to run it, e.g. every few minutes with a
// MinAge, or nightly.
func (c *Collection) Reconcile(ctx context.Context, opts ...*ReconcileOptions) (*ReconcileResult, error) {
	var o ReconcileOptions
	for _, p := range opts {
		if p != nil {
			o = *p
		}
	}
	if o.Mode != PerToken && o.Mode != SetUnset {
		return nil, fmt.Errorf("%w: unknown ReconcileMode %d", sturdy.ErrInvalidArgument, o.Mode)
	}
	var limit bson.ObjectID // fold tokens below it; zero: no age limit
	if o.MinAge > 0 {
		limit = bson.NewObjectIDFromTimestamp(time.Now().Add(-o.MinAge))
	}
	match := bson.D{{Key: c.pending + ".0", Value: bson.D{{Key: "$exists", Value: true}}}}
	if !limit.IsZero() {
		match = bson.D{{Key: c.pending + ".t", Value: bson.D{{Key: "$lt", Value: limit}}}}
	}
	if o.Filter != nil {
		match = bson.D{{Key: "$and", Value: bson.A{o.Filter, match}}}
	}
	findOpts := &sturdy.FindOptions{}
	if o.Mode == PerToken {
		findOpts.Projection = bson.D{{Key: c.pending, Value: 1}}
	}
	cur, err := c.coll.Find(ctx, match, findOpts)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	res := &ReconcileResult{}
	for cur.Next(ctx) {
		doc := bson.Raw(append([]byte(nil), cur.Current...))
		res.Documents++
		if o.Mode == PerToken {
			err = c.foldEach(ctx, doc, limit, res)
		} else {
			err = c.foldSnapshot(ctx, doc, limit, res)
		}
		if err != nil {
			return res, err
		}
	}
	return res, cur.Err()
}

// entry is one parsed pending entry.
type entry struct {
	tok bson.ObjectID
	inc bson.D
}

// parseEntry reads a pending entry {t: ObjectID, inc: [{f, n}...]}.
func (c *Collection) parseEntry(v bson.RawValue) (entry, bool) {
	var e entry
	doc, ok := v.DocumentOK()
	if !ok {
		return e, false
	}
	if e.tok, ok = doc.Lookup("t").ObjectIDOK(); !ok {
		return e, false
	}
	arr, ok := doc.Lookup("inc").ArrayOK()
	if !ok {
		return e, false
	}
	vals, err := arr.Values()
	if err != nil || len(vals) == 0 {
		return e, false
	}
	for _, pv := range vals {
		pair, ok := pv.DocumentOK()
		if !ok {
			return e, false
		}
		f, ok := pair.Lookup("f").StringValueOK()
		if !ok || c.checkField(f) != nil {
			return e, false
		}
		n := pair.Lookup("n")
		switch n.Type {
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		default:
			return e, false
		}
		e.inc = append(e.inc, bson.E{Key: f, Value: n})
	}
	return e, true
}

// pendingEntries returns the raw pending array of doc and its values.
func (c *Collection) pendingEntries(doc bson.Raw) (bson.RawValue, []bson.RawValue) {
	v := doc.Lookup(c.pending)
	arr, ok := v.ArrayOK()
	if !ok {
		return v, nil
	}
	vals, _ := arr.Values()
	return v, vals
}

func (c *Collection) foldEach(ctx context.Context, doc bson.Raw, limit bson.ObjectID, res *ReconcileResult) error {
	id := doc.Lookup("_id")
	_, vals := c.pendingEntries(doc)
	for _, v := range vals {
		e, ok := c.parseEntry(v)
		switch {
		case !ok:
			res.Invalid++
			continue
		case !limit.IsZero() && bytes.Compare(e.tok[:], limit[:]) >= 0:
			res.Young++
			continue
		}
		matched, _, err := c.settle(ctx, id, e.tok, e.inc, true)
		if err != nil {
			return err
		}
		if matched {
			res.Folded++
		} else {
			res.Gone++
		}
	}
	return nil
}

// foldSnapshot is SetUnset's fold of one document: one guarded update
// writes the totals of its foldable entries and leaves the rest pending.
func (c *Collection) foldSnapshot(ctx context.Context, doc bson.Raw, limit bson.ObjectID, res *ReconcileResult) error {
	pendingRaw, vals := c.pendingEntries(doc)
	f := c.splitPending(doc.Lookup("_id"), vals, limit, res)
	if len(f.fold) == 0 {
		return nil
	}
	if err := f.sum(); err != nil {
		return err
	}
	filter, update, err := c.foldUpdate(doc, pendingRaw, f)
	if err != nil {
		return err
	}
	if c.beforeSetUnset != nil {
		c.beforeSetUnset(f.id)
	}
	var r *sturdy.UpdateResult
	_, err = retry(ctx, c.retryOn, func(ctx context.Context) (err error) {
		r, err = c.coll.UpdateOne(ctx, filter, update)
		return err
	})
	if err != nil {
		return err
	}
	if r.MatchedCount == 0 {
		// Changed since read — or our first attempt applied and the retry
		// found the new state. Either way nothing is counted twice; a later
		// pass folds whatever is still pending.
		res.Changed++
		return nil
	}
	res.Folded += len(f.fold)
	return nil
}

// snapshotFold is what foldSnapshot folds from one document.
type snapshotFold struct {
	id     bson.RawValue
	fold   []entry       // the entries folded
	keep   bson.A        // the entries left pending: invalid or too young
	newest bson.ObjectID // the newest folded token, the new cutoff
	fields []string      // the folded fields, in order of first appearance
	sums   map[string]number
}

// splitPending sorts a document's pending entries into those to fold and
// those to keep, counting the kept ones in res.
func (c *Collection) splitPending(id bson.RawValue, vals []bson.RawValue, limit bson.ObjectID, res *ReconcileResult) *snapshotFold {
	f := &snapshotFold{id: id}
	for _, v := range vals {
		e, ok := c.parseEntry(v)
		switch {
		case !ok:
			res.Invalid++
			f.keep = append(f.keep, v)
		case !limit.IsZero() && bytes.Compare(e.tok[:], limit[:]) >= 0:
			res.Young++
			f.keep = append(f.keep, v)
		default:
			f.fold = append(f.fold, e)
			if bytes.Compare(e.tok[:], f.newest[:]) > 0 {
				f.newest = e.tok
			}
		}
	}
	return f
}

// sum totals the folded increments per field.
func (f *snapshotFold) sum() error {
	f.sums = map[string]number{}
	for _, e := range f.fold {
		for _, inc := range e.inc {
			n, _ := numberOf(inc.Value.(bson.RawValue))
			if s, seen := f.sums[inc.Key]; seen {
				sum, err := s.add(n)
				if err != nil {
					return fmt.Errorf("once: reconcile %v: field %q: %w", f.id, inc.Key, err)
				}
				f.sums[inc.Key] = sum
			} else {
				f.fields = append(f.fields, inc.Key)
				f.sums[inc.Key] = n
			}
		}
	}
	return nil
}

// foldUpdate is the fold's update, setting each field to its value in doc
// plus its total, and its guard: the filter matches only while the pending
// array and every folded field are as read.
func (c *Collection) foldUpdate(doc bson.Raw, pendingRaw bson.RawValue, f *snapshotFold) (filter, update bson.D, err error) {
	filter = bson.D{{Key: "_id", Value: f.id}, {Key: c.pending, Value: pendingRaw}}
	set := bson.D{}
	for _, field := range f.fields {
		cur, err := doc.LookupErr(strings.Split(field, ".")...)
		total := f.sums[field]
		if err != nil {
			filter = append(filter, bson.E{Key: field, Value: bson.D{{Key: "$exists", Value: false}}})
		} else {
			n, ok := numberOf(cur)
			if !ok {
				return nil, nil, fmt.Errorf("once: reconcile %v: field %q holds a %s, not a number", f.id, field, cur.Type)
			}
			filter = append(filter, bson.E{Key: field, Value: cur})
			if total, err = n.add(total); err != nil {
				return nil, nil, fmt.Errorf("once: reconcile %v: field %q: %w", f.id, field, err)
			}
		}
		set = append(set, bson.E{Key: field, Value: total.value()})
	}
	if len(f.keep) > 0 {
		set = append(set, bson.E{Key: c.pending, Value: f.keep})
		update = bson.D{{Key: "$set", Value: set}}
	} else {
		update = bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: c.pending, Value: ""}}}}
	}
	update = append(update, bson.E{Key: "$max", Value: bson.D{{Key: c.cutoff, Value: f.newest}}})
	return filter, update, nil
}

// number is a BSON number with $inc's type rules: int32 + int32 stays
// int32 unless it overflows, then int64; anything with a double is a double.
// number keeps a counter's BSON type through the clean-up's arithmetic
// (an int32 counter stays int32 until it overflows), which reading it as an
// int64 (internal/bsonnum) would lose.
type number struct {
	kind bson.Type
	i    int64
	f    float64
}

var errOverflow = errors.New("int64 overflow")

func numberOf(v bson.RawValue) (number, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return number{kind: bson.TypeInt32, i: int64(v.Int32())}, true
	case bson.TypeInt64:
		return number{kind: bson.TypeInt64, i: v.Int64()}, true
	case bson.TypeDouble:
		return number{kind: bson.TypeDouble, f: v.Double()}, true
	}
	return number{}, false
}

func (a number) float() float64 {
	if a.kind == bson.TypeDouble {
		return a.f
	}
	return float64(a.i)
}

func (a number) add(b number) (number, error) {
	if a.kind == bson.TypeDouble || b.kind == bson.TypeDouble {
		return number{kind: bson.TypeDouble, f: a.float() + b.float()}, nil
	}
	s := a.i + b.i
	if (b.i > 0 && s < a.i) || (b.i < 0 && s > a.i) {
		return number{}, errOverflow
	}
	kind := bson.TypeInt64
	if a.kind == bson.TypeInt32 && b.kind == bson.TypeInt32 && s >= math.MinInt32 && s <= math.MaxInt32 {
		kind = bson.TypeInt32
	}
	return number{kind: kind, i: s}, nil
}

func (a number) value() any {
	switch a.kind {
	case bson.TypeInt32:
		return int32(a.i)
	case bson.TypeInt64:
		return a.i
	}
	return a.f
}
