package mongov2_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/once"
)

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 30*time.Second) }

func officialClient(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CloseOnCleanup(t, c.Disconnect)
	return c
}

// The official driver's errors, as a scripted server provokes them, come
// out of the adapter classified the way once needs, with the original
// still reachable.
func TestErrorClassification(t *testing.T) {
	cases := []struct {
		name      string
		reply     func(r *blackpipe.Request) error
		network   bool
		dupIndex  string // "" for not a duplicate key
		code      int32  // *sturdy.CommandError code, 0 for none
		wceCode   int32  // WriteConcernError code, 0 for none
		transient bool
	}{
		{"duplicate _id", func(r *blackpipe.Request) error {
			return r.ReplyWriteErrors(0, blackpipe.WriteError{Code: 11000, Message: "E11000 duplicate key error collection: app.c index: _id_ dup key: { _id: 1 }"})
		}, false, "_id_", 0, 0, false},
		{"duplicate email", func(r *blackpipe.Request) error {
			return r.ReplyWriteErrors(0, blackpipe.WriteError{Code: 11000, Message: "E11000 duplicate key error collection: app.c index: email_1 dup key: { email: \"a\" }"})
		}, false, "email_1", 0, 0, false},
		{"not writable primary", func(r *blackpipe.Request) error {
			return r.ReplyError(10107, "not primary")
		}, false, "", 10107, 0, true},
		{"retryable label", func(r *blackpipe.Request) error {
			return r.ReplyError(2, "bad value", sturdy.LabelRetryableWrite)
		}, false, "", 2, 0, true},
		{"unauthorized", func(r *blackpipe.Request) error {
			return r.ReplyError(13, "not authorized")
		}, false, "", 13, 0, false},
		{"write concern shutdown", func(r *blackpipe.Request) error {
			return r.ReplyWriteConcernError(1, blackpipe.WriteConcernError{Code: 91, Message: "shutting down"})
		}, false, "", 0, 91, true},
		{"write concern timeout", func(r *blackpipe.Request) error {
			return r.ReplyWriteConcernError(1, blackpipe.WriteConcernError{Code: 64, Message: "waiting for replication timed out"})
		}, false, "", 0, 64, false},
		{"hang-up", func(r *blackpipe.Request) error { return r.Hangup() }, true, "", 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := blackpipe.Start(t)
			ctx := testCtx(t)
			coll := mongov2.Collection(officialClient(t, s.URI()).Database("app").Collection("c"))
			done := make(chan error, 1)
			go func() {
				_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
				done <- err
			}()
			r, err := s.Receive(ctx, blackpipe.Doc(bson.D{{Key: "insert", Value: "c"}}))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.reply(r); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if err == nil {
				t.Fatal("no error")
			}
			if got := sturdy.IsNetworkError(err); got != tc.network {
				t.Errorf("IsNetworkError = %v: %v", got, err)
			}
			ix, dup := sturdy.DuplicateKeyIndex(err)
			if dup != (tc.dupIndex != "") || ix != tc.dupIndex {
				t.Errorf("DuplicateKeyIndex = %q, %v: %v", ix, dup, err)
			}
			var ce *sturdy.CommandError
			if got := errors.As(err, &ce); got != (tc.code != 0) || (got && ce.Code != tc.code) {
				t.Errorf("CommandError %v (want code %d): %v", ce, tc.code, err)
			}
			var we *sturdy.WriteException
			if tc.wceCode != 0 && (!errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != tc.wceCode) {
				t.Errorf("WriteException %+v (want write concern code %d): %v", we, tc.wceCode, err)
			}
			if got := once.IsTransient(err); got != tc.transient {
				t.Errorf("once.IsTransient = %v: %v", got, err)
			}
			if !tc.network {
				var original mongo.ServerError
				if !errors.As(err, &original) {
					t.Errorf("the official driver's error is not reachable: %T %v", err, err)
				}
			}
		})
	}
}

// Reads come back as sturdy types: a Cursor that crosses getMore batches,
// and ErrNoDocuments from FindOne.
func TestReads(t *testing.T) {
	sim := mongosim.Start(t)
	ctx := testCtx(t)
	coll := mongov2.Collection(officialClient(t, sim.URI()).Database("app").Collection("c"))
	for i := 1; i <= 5; i++ {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "sq", Value: i * i}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 2}}}},
		&sturdy.FindOptions{Sort: bson.D{{Key: "_id", Value: -1}}, BatchSize: 2, Projection: bson.D{{Key: "sq", Value: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int `bson:"_id"`
		Sq int `bson:"sq"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].ID != 5 || got[0].Sq != 25 || got[3].ID != 2 || got[3].Sq != 4 {
		t.Fatalf("Find: %+v", got)
	}
	if cur.Next(ctx) {
		t.Fatal("Next after All")
	}

	err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: 99}}).Err()
	if !errors.Is(err, sturdy.ErrNoDocuments) || !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("FindOne of a missing document: %v", err)
	}
	var one bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&one); err != nil || one["sq"] != int32(9) {
		t.Fatalf("FindOne: %v %v", one, err)
	}
}

// Options the official driver cannot take from sturdy's types are refused
// before anything is sent. Only the commands themselves are counted: the
// driver's monitors send hellos whenever they like.
func TestUnsupportedOptionsFailLoudly(t *testing.T) {
	s := blackpipe.Start(t)
	var sent atomic.Int64
	s.Autorespond(blackpipe.AnyOf(blackpipe.Command("update"), blackpipe.Command("find")), func(*blackpipe.Request) bool {
		sent.Add(1)
		return false
	})
	ctx := testCtx(t)
	coll := mongov2.Collection(officialClient(t, s.URI()).Database("app").Collection("c"))
	if _, err := coll.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, &sturdy.UpdateOptions{Session: &sturdy.Session{}}); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Errorf("UpdateOne with a sturdy session: %v", err)
	}
	if _, err := coll.Find(ctx, bson.D{}, &sturdy.FindOptions{MaxTime: time.Second}); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Errorf("Find with MaxTime: %v", err)
	}
	if _, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, &sturdy.UpdateOptions{Sort: bson.D{{Key: "a", Value: 1}}}); !errors.Is(err, sturdy.ErrInvalidArgument) {
		t.Errorf("UpdateMany with Sort: %v", err)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d commands sent", n)
	}
}
