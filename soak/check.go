package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/internal/bsonnum"
	"github.com/sturdy-go/sturdy/once"
)

// regOp is one register operation for the linearizability check. Times are
// nanoseconds since the start of the run; a write whose outcome is unknown
// (it failed) has Return = math.MaxInt64: it may take effect at any time
// after its call, as in Jepsen's histories.
// Fields are ordered and sized for 32 bytes a record (the register
// history is the one record a run keeps per operation).
type regOp struct {
	value  int64 // written, or read (0: no document yet)
	call   int64
	ret    int64
	key    uint16 // < registers
	client uint16 // the worker
	write  bool
}

// register reads or writes one of the single-document registers.
func (w *worker) register(ctx context.Context, regs adapt.Collection, start time.Time) error {
	key := w.rng.IntN(registers)
	id := fmt.Sprintf("reg/%d", key)
	op := regOp{key: uint16(key), client: uint16(w.g), call: int64(time.Since(start))}
	if w.rng.IntN(2) == 0 {
		op.write = true
		op.value = int64(w.g)<<40 | int64(len(w.regOps)+1)
		_, err := regs.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: op.value}}}},
			&sturdy.UpdateOptions{Upsert: true})
		op.ret = int64(time.Since(start))
		if err != nil {
			op.ret = math.MaxInt64
		}
		w.regOps = append(w.regOps, op)
		return err
	}
	var doc struct {
		V int64 `bson:"v"`
	}
	err := regs.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	op.ret = int64(time.Since(start))
	switch {
	case errors.Is(err, sturdy.ErrNoDocuments):
		err = nil
	case err != nil:
		return err // a failed read has no effect: leave it out
	}
	op.value = doc.V
	w.regOps = append(w.regOps, op)
	return nil
}

// registerModel is a single register per key, starting at 0 (absent).
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := make(map[int][]porcupine.Operation)
		var keys []int
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Ints(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("put(%d, %d)", in.key, in.value)
		}
		return fmt.Sprintf("get(%d) -> %d", in.key, output.(int64))
	},
}

type regInput struct {
	key   int
	write bool
	value int64
}

// CheckRegisters checks a register history with porcupine: "ok",
// "illegal", or "unknown" when the checker ran out of time.
func checkRegisters(ops []regOp, timeout time.Duration) string {
	history := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		history = append(history, porcupine.Operation{ClientId: int(op.client), Input: regInput{key: int(op.key), write: op.write, value: op.value},
			Call: op.call, Output: op.value, Return: op.ret})
	}
	switch porcupine.CheckOperationsTimeout(registerModel, history, timeout) {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "illegal"
	}
	return "unknown"
}

// check reads the data back and fills in the report.
func (r *Report) check(ctx context.Context, db *sturdy.Database, workers []*worker, lat *latencies) error {
	var regOps []regOp
	timeline := map[int]*Second{}
	for _, w := range workers {
		regOps = append(regOps, w.regOps...)
		for k, c := range w.byKind {
			kc := r.ByKind[k]
			kc.Ops += c.Ops
			kc.Failed += c.Failed
			r.ByKind[k] = kc
			r.Ops += c.Ops
			r.Failed += c.Failed
		}
		for e, n := range w.errs {
			r.Errors[e] += n
		}
		for i := 0; i+1 < len(w.finished); i += 2 {
			s := timeline[i/2]
			if s == nil {
				s = &Second{}
				timeline[i/2] = s
			}
			s.Succeeded += w.finished[i]
			s.Failed += w.finished[i+1]
		}
	}
	r.Succeeded = r.Ops - r.Failed
	for i := 0; i < len(timeline); i++ {
		s := timeline[i]
		if s == nil {
			s = &Second{}
		}
		if h := lat.second(i); h != nil {
			s.P99ms = h.percentileMS(0.99)
		}
		r.Timeline = append(r.Timeline, *s)
	}
	r.P50ms, r.P99ms = lat.all.percentileMS(0.50), lat.all.percentileMS(0.99)

	// Lost is recounted from the final reads; the live check only shows
	// losses early.
	r.Lost = 0
	if err := r.checkIncrements(ctx, db.Collection("increments"), workers); err != nil {
		return err
	}
	if err := r.checkInserts(ctx, db.Collection("inserts"), workers); err != nil {
		return err
	}
	if err := r.checkSaves(ctx, db.Collection("saves"), workers); err != nil {
		return err
	}
	for _, w := range workers {
		if len(w.txns) > 0 {
			if err := r.checkTransactions(ctx, db.Collection(txnColl), workers); err != nil {
				return err
			}
			break
		}
	}
	r.Linearization = checkRegisters(regOps, time.Minute)
	r.Linearizable = r.Linearization == "ok"
	return nil
}

func (r *Report) add(kind string, failedApplied, lost, dup int64) {
	kc, ok := r.ByKind[kind]
	if !ok && failedApplied == 0 && lost == 0 && dup == 0 {
		return // a kind the run did not do
	}
	kc.FailedApplied += failedApplied
	kc.Lost += lost
	kc.Duplicated += dup
	r.ByKind[kind] = kc
	r.FailedApplied += failedApplied
	r.Lost += lost
	r.Duplicated += dup
}

// eachDoc streams the documents of coll (projected, if projection is not
// nil) to fn, so a check holds one batch of them at a time.
func eachDoc(ctx context.Context, coll *sturdy.Collection, projection any, fn func(bson.Raw) error) error {
	cur, err := coll.Find(ctx, bson.D{}, &sturdy.FindOptions{Projection: projection})
	if err != nil {
		return fmt.Errorf("soak: read %s: %w", coll.Name(), err)
	}
	defer cur.Close(context.Background())
	for cur.Next(ctx) {
		if err := fn(cur.Current); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("soak: read %s: %w", coll.Name(), err)
	}
	return nil
}

// checkIncrements: after Reconcile every increment's marker field is 0 or
// 1 (more is a duplicate), "n" is the sum of the markers (a $inc applied
// without its marker would break it), a successful increment's marker is
// 1, and a failure reported NotApplied has none.
func (r *Report) checkIncrements(ctx context.Context, coll *sturdy.Collection, workers []*worker) error {
	// applied[g] has a bit per increment of worker g whose marker is set.
	applied := make([]bitset, len(workers))
	for g, w := range workers {
		applied[g] = newBitset(len(w.incs))
	}
	var lost, dup, failedApplied int64
	err := eachDoc(ctx, coll, nil, func(raw bson.Raw) error {
		id, _ := raw.Lookup("_id").StringValueOK()
		if pending, ok := raw.Lookup("pending").ArrayOK(); ok {
			if vals, _ := pending.Values(); len(vals) > 0 {
				return fmt.Errorf("soak: %s still has %d pending increments after Reconcile", id, len(vals))
			}
		}
		group, docN, _ := parsePair(id, "inc/", "/")
		n := int64Value(raw.Lookup("n"))
		var sum int64
		if m, ok := raw.Lookup("m").DocumentOK(); ok {
			elems, _ := m.Elements()
			for _, e := range elems {
				v := int64Value(e.Value())
				sum += v
				if v > 1 {
					dup += v - 1
				}
				if g, k, ok := parsePair(e.Key(), "g", "_"); ok && v >= 1 && g < len(workers) && g/incGroup == group {
					applied[g].set(docN*incPerDoc + k)
				}
			}
		}
		// Each unit of n not matched by a marker is an increment applied
		// twice in some way the markers did not catch.
		if n > sum {
			dup += n - sum
		} else {
			lost += sum - n
		}
		return nil
	})
	if err != nil {
		return err
	}
	for g, w := range workers {
		for i := range w.incs {
			switch st, ok := w.incs.status(i), applied[g].has(i); {
			case st == stOK && !ok:
				lost++
			case st == stFailed && ok:
				failedApplied++
				if w.incs.outcome(i) == once.NotApplied {
					r.Misreport++
				}
			}
		}
	}
	r.add(kindIncrement, failedApplied, lost, dup)
	return nil
}

// checkInserts: a successful insert's document exists; a failed one's may.
// The _id index rules out duplicates.
func (r *Report) checkInserts(ctx context.Context, coll *sturdy.Collection, workers []*worker) error {
	found := make([]bitset, len(workers))
	for g, w := range workers {
		found[g] = newBitset(len(w.inserts))
	}
	err := eachDoc(ctx, coll, bson.D{{Key: "_id", Value: 1}}, func(raw bson.Raw) error {
		id, _ := raw.Lookup("_id").StringValueOK()
		if g, n, ok := parsePair(id, "ins/", "/"); ok && g < len(workers) {
			found[g].set(n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var lost, failedApplied int64
	for g, w := range workers {
		for i := range w.inserts {
			switch st, ok := w.inserts.status(i), found[g].has(i); {
			case st == stOK && !ok:
				lost++
			case st == stFailed && ok:
				failedApplied++
			}
		}
	}
	r.add(kindInsert, failedApplied, lost, 0)
	return nil
}

// checkSaves: every save appends its op to the document's ops at the
// version it read, so each op appears at most once and the version equals
// the number of ops; a successful save's op is there.
func (r *Report) checkSaves(ctx context.Context, coll *sturdy.Collection, workers []*worker) error {
	seen := make([]bitset, len(workers))
	for g, w := range workers {
		seen[g] = newBitset(len(w.saves))
	}
	var lost, dup, failedApplied int64
	err := eachDoc(ctx, coll, nil, func(raw bson.Raw) error {
		var d savedDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("soak: decode save: %w", err)
		}
		for _, op := range d.Ops {
			if g, n, ok := parsePair(op, "g", "_"); ok && g < len(workers) && seen[g].set(n) {
				dup++
			}
		}
		if d.Version != int64(len(d.Ops)) {
			dup += max(0, d.Version-int64(len(d.Ops)))
			lost += max(0, int64(len(d.Ops))-d.Version)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for g, w := range workers {
		for i := range w.saves {
			switch st, ok := w.saves.status(i), seen[g].has(i); {
			case st == stOK && !ok:
				lost++
			case st == stFailed && ok:
				failedApplied++
			}
		}
	}
	r.add(kindSave, failedApplied, lost, dup)
	return nil
}

// int64Value is a numeric field's value, 0 when it is not a number.
func int64Value(v bson.RawValue) int64 {
	n, _ := bsonnum.Int64(v)
	return n
}
