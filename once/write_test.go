package once

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

func TestInsertOneNoFault(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		c := New(e.target)
		res, err := c.InsertOne(testCtx(t), bson.D{{Key: "item", Value: "tea"}})
		mustNoErr(t, err)
		id, ok := res.InsertedID.(bson.ObjectID)
		if !ok || res.Retried || res.ReplyLost {
			t.Fatalf("result %+v", res)
		}
		if got := findDoc(t, e.coll, id); got["item"] != "tea" {
			t.Fatalf("stored %v", got)
		}
		// A caller-supplied _id is kept.
		res, err = c.InsertOne(testCtx(t), bson.M{"_id": "order-1", "item": "cake"})
		mustNoErr(t, err)
		if res.InsertedID != "order-1" {
			t.Fatalf("InsertedID %v", res.InsertedID)
		}
	})
}

// The reply of the first insert is lost after the server applied it. With
// the client's retryable writes off, the package's retry hits a duplicate
// key on _id, which proves the first attempt worked; with them on, the
// client's own retry is answered from the server's transaction table.
func TestInsertOneReplyLost(t *testing.T) {
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		e.faults.set(nth("insert", 0, dropReply))
		res, err := c.InsertOne(testCtx(t), bson.D{{Key: "item", Value: "tea"}})
		mustNoErr(t, err)
		if n := count(t, e.coll, nil); n != 1 {
			t.Fatalf("%d documents, want 1", n)
		}
		if replies, _ := e.faults.counts(); replies != 1 {
			t.Fatalf("dropped %d replies, want 1", replies)
		}
		// Without the client's retryable writes the package must have
		// retried; with them, either layer may have.
		if res.Retried != res.ReplyLost || (!e.retryWrites && !res.Retried) {
			t.Fatalf("result %+v", res)
		}
	})
}

// Two replies in a row are lost. With the client retrying writes itself,
// the package's retry comes third and proves the insert; without, both
// attempts fail and the error is returned. Either way there is one document.
func TestInsertOneTwoRepliesLost(t *testing.T) {
	bothRetryModes(t, func(t *testing.T, e *env) {
		c := New(e.target)
		i := 0
		e.faults.set(func(name string, _ bson.Raw) action {
			if name == "insert" {
				i++
				if i <= 2 {
					return dropReply
				}
			}
			return pass
		})
		res, err := c.InsertOne(testCtx(t), bson.D{{Key: "n", Value: 1}})
		switch {
		case err == nil && e.driver == officialDriver && e.retryWrites:
			// The official driver retries a retryable write for as long as
			// the context allows, so it absorbs both losses itself.
			if res.Retried || res.ReplyLost || i != 3 {
				t.Fatalf("result %+v after %d inserts", res, i)
			}
		case err == nil:
			if !e.retryWrites || !res.Retried || !res.ReplyLost {
				t.Fatalf("result %+v", res)
			}
		case !sturdy.IsNetworkError(err) || i != 2:
			t.Fatalf("err %v after %d inserts", err, i)
		}
		if n := count(t, e.coll, nil); n != 1 {
			t.Fatalf("%d documents, want 1", n)
		}
	})
}

// The first insert is lost before it reaches the server (mongosim closes
// the connection without executing it); the retry inserts the document.
func TestInsertOneRequestLost(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		mustNoErr(t, e.sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}}}}))
		res, err := New(e.target).InsertOne(testCtx(t), bson.D{{Key: "n", Value: 1}})
		mustNoErr(t, err)
		if !res.Retried || res.ReplyLost || count(t, e.coll, nil) != 1 {
			t.Fatalf("result %+v, %d documents", res, count(t, e.coll, nil))
		}
	})
}

// A duplicate key on another unique index is a real conflict, on the first
// attempt and on the retry alike; so is an _id taken before the first
// attempt.
func TestInsertOneOtherUniqueIndex(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		ctx := testCtx(t)
		yes := true
		_, err := e.coll.CreateIndex(ctx, sturdy.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: &sturdy.IndexOptions{Unique: &yes}})
		mustNoErr(t, err)
		c := New(e.target)
		_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a@x"}})
		mustNoErr(t, err)

		_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}})
		var dke *DuplicateKeyError
		if !errors.As(err, &dke) || dke.Index != "email_1" || !sturdy.IsDuplicateKey(err) {
			t.Fatalf("first attempt: %v", err)
		}

		// The first attempt is lost before executing; the retry collides on
		// email_1, which must not be mistaken for our own first attempt.
		mustNoErr(t, e.sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}}}}))
		_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "a@x"}})
		if !errors.As(err, &dke) || dke.Index != "email_1" || dke.ID != int32(3) {
			t.Fatalf("retry: %v", err)
		}

		_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "b@x"}})
		if !errors.As(err, &dke) || dke.Index != "_id_" {
			t.Fatalf("taken _id: %v", err)
		}
		if n := count(t, e.coll, nil); n != 1 {
			t.Fatalf("%d documents, want 1", n)
		}
	})
}

// A command error is not retried; a persistent network failure is retried
// exactly once.
func TestInsertOneRetriesOnlyTransientErrorsOnce(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		c := New(e.target)
		inserts := 0
		e.faults.set(func(name string, _ bson.Raw) action {
			if name == "insert" {
				inserts++
				return dropRequest
			}
			return pass
		})
		_, err := c.InsertOne(testCtx(t), bson.D{{Key: "n", Value: 1}})
		if !sturdy.IsNetworkError(err) || inserts != 2 {
			t.Fatalf("outage: err %v after %d inserts, want a network error after 2", err, inserts)
		}

		e.faults.set(nil)
		mustNoErr(t, e.sim.SetFailPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 13}}}}))
		_, err = c.InsertOne(testCtx(t), bson.D{{Key: "n", Value: 2}})
		var ce *sturdy.CommandError
		if !errors.As(err, &ce) || ce.Code != 13 {
			t.Fatalf("command error: %v", err)
		}
		// The fail point had one activation left: the command was sent once.
		_, err = c.InsertOne(testCtx(t), bson.D{{Key: "n", Value: 3}})
		if !errors.As(err, &ce) || ce.Code != 13 {
			t.Fatalf("second activation: %v", err)
		}
		if n := count(t, e.coll, nil); n != 0 {
			t.Fatalf("%d documents", n)
		}
	})
}

func TestRetryStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, func(context.Context) error {
		calls++
		cancel()
		return &sturdy.NetworkError{Op: "read", Err: errInjected}
	})
	if calls != 1 || !sturdy.IsNetworkError(err) {
		t.Fatalf("%d calls, %v", calls, err)
	}
	calls = 0
	err = Retry(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return &sturdy.NetworkError{Op: "read", Err: errInjected}
		}
		return nil
	})
	if calls != 2 || err != nil {
		t.Fatalf("%d calls, %v", calls, err)
	}
}

func TestIsTransient(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&sturdy.NetworkError{Op: "read", Err: errInjected}, true},
		{&sturdy.CommandError{Code: 10107, Name: "NotWritablePrimary"}, true},
		{&sturdy.CommandError{Code: 91}, true},
		{&sturdy.CommandError{Code: 11000}, false},
		{&sturdy.CommandError{Code: 13}, false},
		{&sturdy.CommandError{Code: 2, Labels: []string{sturdy.LabelRetryableWrite}}, true},
		{&sturdy.ServerSelectionError{Reason: "writable server", Err: &sturdy.NetworkError{Op: "dial"}}, false},
		{&sturdy.WriteException{WriteConcernError: &sturdy.WriteConcernError{Code: 91}}, true},
		{&sturdy.WriteException{WriteErrors: []sturdy.WriteError{{Code: 11000}}}, false},
	}
	for _, tc := range cases {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v", tc.err, got)
		}
	}
}

// Deleting by a unique key twice is deleting once.
func TestDeleteOneReplyLost(t *testing.T) {
	bothRetryModes(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		_, err := e.coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}})
		mustNoErr(t, err)
		c := New(e.target)
		e.faults.set(nth("delete", 0, dropReply))
		res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}})
		mustNoErr(t, err)
		if n := count(t, e.coll, nil); n != 1 {
			t.Fatalf("%d documents left, want 1", n)
		}
		if !e.retryWrites && (!res.Retried || res.DeletedCount != 0) {
			t.Fatalf("result %+v: the retry should have found nothing to delete", res)
		}
		e.faults.set(nth("delete", 0, dropReply))
		res, err = c.DeleteMany(ctx, bson.D{})
		mustNoErr(t, err)
		if n := count(t, e.coll, nil); n != 0 || (!e.retryWrites && !res.Retried) {
			t.Fatalf("DeleteMany: %d left, %+v", n, res)
		}
	})
}

func TestUpdateOneIdempotent(t *testing.T) {
	bothRetryModes(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		c := New(e.target)
		e.faults.set(nth("update", 0, dropReply))
		update := bson.D{{Key: "$set", Value: bson.D{{Key: "sunny", Value: true}}},
			{Key: "$addToSet", Value: bson.D{{Key: "tags", Value: "warm"}}},
			{Key: "$max", Value: bson.D{{Key: "high", Value: 31}}}}
		res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "2016-06-28"}}, update, &sturdy.UpdateOptions{Upsert: true})
		mustNoErr(t, err)
		if !e.retryWrites && !res.Retried {
			t.Fatalf("result %+v", res)
		}
		got := findDoc(t, e.coll, "2016-06-28")
		if got["sunny"] != true || len(got["tags"].(bson.A)) != 1 || got["high"] != int32(31) {
			t.Fatalf("document %v", got)
		}
		e.faults.set(nth("update", 0, dropReply))
		_, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "2016-06-28"}}, bson.D{{Key: "sunny", Value: false}})
		mustNoErr(t, err)
		if got := findDoc(t, e.coll, "2016-06-28"); len(got) != 2 || got["sunny"] != false {
			t.Fatalf("replaced %v", got)
		}
	})
}

func TestUpdateRejectsNonIdempotent(t *testing.T) {
	eachDriver(t, func(t *testing.T, d driver) {
		e := newEnv(t, d, false)
		c := New(e.target)
		for _, u := range []any{
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "$push", Value: bson.D{{Key: "l", Value: 1}}}},
			bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}},
			bson.D{{Key: "$currentDate", Value: bson.D{{Key: "at", Value: true}}}},
		} {
			if _, err := c.UpdateOne(testCtx(t), bson.D{}, u); !errors.Is(err, ErrNotIdempotent) {
				t.Errorf("%v: %v", u, err)
			}
			if _, err := c.UpdateMany(testCtx(t), bson.D{}, u); !errors.Is(err, ErrNotIdempotent) {
				t.Errorf("%v: %v", u, err)
			}
		}
		if _, err := c.UpdateOne(testCtx(t), bson.D{}, bson.D{{Key: "a", Value: 1}}); !errors.Is(err, sturdy.ErrInvalidArgument) {
			t.Errorf("replacement document as update: %v", err)
		}
	})
}
