package optimistic_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/adapt"
	"github.com/sturdy-go/sturdy/adapt/mongov2"
	"github.com/sturdy-go/sturdy/internal/testsupport"
	"github.com/sturdy-go/sturdy/mongosim"
	"github.com/sturdy-go/sturdy/optimistic"
)

type article struct {
	ID      string    `bson:"_id"`
	Version int64     `bson:"version"`
	Title   string    `bson:"title"`
	Body    string    `bson:"body"`
	Owner   string    `bson:"owner"`
	Created time.Time `bson:"created"`
	Likes   int       `bson:"likes"`
	Tags    []string  `bson:"tags"`
}

// driver names the client a test runs optimistic over.
type driver string

const (
	sturdyDriver   driver = "sturdy"
	officialDriver driver = "official"
)

// eachDriver runs fn once per driver.
func eachDriver(t *testing.T, fn func(t *testing.T, d driver)) {
	for _, d := range []driver{sturdyDriver, officialDriver} {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// connect starts a mongosim and returns its collection twice: through a
// sturdy client (to set up and inspect) and as the collection under test,
// through driver d.
func connect(t *testing.T, d driver, retryWrites bool) (*sturdy.Collection, adapt.Collection) {
	t.Helper()
	coll, uri := connectSturdy(t, retryWrites)
	if d == sturdyDriver {
		return coll, coll
	}
	oc, err := mongo.Connect(options.Client().ApplyURI(uri).SetRetryWrites(retryWrites))
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CloseOnCleanup(t, oc.Disconnect)
	return coll, mongov2.Collection(oc.Database("app").Collection("articles"))
}

func connectSturdy(t *testing.T, retryWrites bool) (*sturdy.Collection, string) {
	t.Helper()
	sim := mongosim.Start(t)
	o, err := sturdy.ParseURI(sim.URI())
	if err != nil {
		t.Fatal(err)
	}
	o.RetryWrites = &retryWrites
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := sturdy.ConnectWithOptions(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CloseOnCleanup(t, client.Disconnect)
	return client.Database("app").Collection("articles"), sim.URI()
}

func testCtx(t *testing.T) context.Context { return testsupport.Context(t, 0) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var clock = time.Date(2015, 7, 18, 11, 16, 55, 818e6, time.UTC)

func newStore(t *testing.T, coll adapt.Collection, keepDeleted bool) *optimistic.Collection {
	now := clock
	var mu sync.Mutex
	return optimistic.New(coll, &optimistic.Options{
		CreateOnly: []string{"owner"}, CreatedField: "created", ModifiedField: "modified", KeepDeleted: keepDeleted,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now },
	})
}

// One code path creates and updates; $setOnInsert fields are written once.
func TestSaveCreateThenUpdate(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		coll, target := connect(t, drv, false)
		ctx := testCtx(t)
		s := newStore(t, target, false)

		a := &article{ID: "abcdef", Title: "Test", Body: "Test Document", Owner: "ann"}
		res, err := s.Save(ctx, a)
		must(t, err)
		if !res.Created || res.Version != 1 || a.Version != 1 || res.ID != "abcdef" {
			t.Fatalf("create: %+v, struct version %d", res, a.Version)
		}
		a.Body, a.Owner = "Updated", "bob" // owner is create-only
		res, err = s.Save(ctx, a)
		must(t, err)
		if res.Created || res.Version != 2 || a.Version != 2 {
			t.Fatalf("update: %+v", res)
		}
		var got bson.M
		must(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "abcdef"}}).Decode(&got))
		created := got["created"].(bson.DateTime).Time().UTC()
		modified := got["modified"].(bson.DateTime).Time().UTC()
		if got["version"] != int64(2) || got["body"] != "Updated" || got["owner"] != "ann" ||
			!created.Equal(clock.Add(time.Second)) || !modified.Equal(clock.Add(2*time.Second)) {
			t.Fatalf("stored %v", got)
		}

		var loaded article
		v, err := s.Load(ctx, "abcdef", &loaded)
		must(t, err)
		if v != 2 || loaded.Body != "Updated" || loaded.Version != 2 {
			t.Fatalf("Load: %d %+v", v, loaded)
		}
	})
}

// A stale version is a typed conflict carrying the id, and changes nothing.
func TestSaveStaleVersionConflicts(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprint("KeepDeleted=", keep), func(t *testing.T) {
				_, target := connect(t, drv, false)
				ctx := testCtx(t)
				s := newStore(t, target, keep)
				_, err := s.Save(ctx, &article{ID: "x", Title: "v1"})
				must(t, err)
				stale := &article{ID: "x", Title: "stale"} // version 0: "new", but x exists
				_, err = s.Save(ctx, stale)
				var ce *optimistic.ConflictError
				if !errors.As(err, &ce) || !errors.Is(err, optimistic.ErrConflict) || ce.ID != "x" || ce.Expected != 0 {
					t.Fatalf("create over existing: %v", err)
				}
				mine := &article{ID: "x", Version: 1, Title: "mine"}
				theirs := &article{ID: "x", Version: 1, Title: "theirs"}
				_, err = s.Save(ctx, theirs)
				must(t, err)
				_, err = s.Save(ctx, mine)
				if !errors.As(err, &ce) || ce.Expected != 1 || mine.Version != 1 {
					t.Fatalf("stale update: %v", err)
				}
				if !keep && !sturdy.IsDuplicateKey(err) {
					t.Fatalf("the conflict should wrap the duplicate-key signal: %v", err)
				}
				var got article
				v, err := s.Load(ctx, "x", &got)
				must(t, err)
				if v != 2 || got.Title != "theirs" {
					t.Fatalf("stored %d %+v", v, got)
				}
			})
		}
	})
}

// A delete is version-checked too; with KeepDeleted a stale writer cannot
// resurrect the document, without it the article's upsert recreates it.
func TestDeleteAndResurrection(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		for _, keep := range []bool{false, true} {
			coll, target := connect(t, drv, false)
			ctx := testCtx(t)
			s := newStore(t, target, keep)
			_, err := s.Save(ctx, &article{ID: "d", Title: "v1"})
			must(t, err)
			if err := s.Delete(ctx, "d", 5); !errors.Is(err, optimistic.ErrConflict) {
				t.Fatalf("stale delete: %v", err)
			}
			must(t, s.Delete(ctx, "d", 1))
			_, err = s.Save(ctx, &article{ID: "d", Version: 1, Title: "late"})
			n, cerr := coll.CountDocuments(ctx, bson.D{})
			must(t, cerr)
			if keep && (!errors.Is(err, optimistic.ErrConflict) || n != 0) {
				t.Fatalf("KeepDeleted: %v, %d documents", err, n)
			}
			if !keep && (err != nil || n != 1) {
				t.Fatalf("upsert path: %v, %d documents", err, n)
			}
		}
	})
}

// A duplicate key on another unique index is not a version conflict.
func TestOtherUniqueIndexIsNotAConflict(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		coll, target := connect(t, drv, false)
		ctx := testCtx(t)
		yes := true
		_, err := coll.CreateIndex(ctx, sturdy.IndexModel{Keys: bson.D{{Key: "title", Value: 1}}, Options: &sturdy.IndexOptions{Unique: &yes}})
		must(t, err)
		s := newStore(t, target, false)
		_, err = s.Save(ctx, &article{ID: "a", Title: "same"})
		must(t, err)
		_, err = s.Save(ctx, &article{ID: "b", Title: "same"})
		if err == nil || errors.Is(err, optimistic.ErrConflict) || !sturdy.IsDuplicateKey(err) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestSaveDocumentKinds(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		_, target := connect(t, drv, false)
		ctx := testCtx(t)
		s := optimistic.New(target, &optimistic.Options{VersionField: "rev"})
		m := bson.M{"_id": 1, "n": 1}
		res, err := s.Save(ctx, m)
		must(t, err)
		if res.Version != 1 || m["rev"] != int64(1) {
			t.Fatalf("bson.M: %+v %v", res, m)
		}
		m["n"] = 2
		_, err = s.Save(ctx, m)
		must(t, err)
		d := bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 1}}
		_, err = s.Save(ctx, &d)
		must(t, err)
		if d[len(d)-1].Key != "rev" || d[len(d)-1].Value != int64(1) {
			t.Fatalf("*bson.D: %v", d)
		}
		res, err = s.Write(ctx, 3, 0, bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "b", Value: 2}})
		must(t, err)
		if !res.Created || res.Version != 1 {
			t.Fatalf("Write: %+v", res)
		}
		if _, err := s.Save(ctx, bson.D{{Key: "n", Value: 1}}); !errors.Is(err, optimistic.ErrNoID) {
			t.Fatalf("no _id: %v", err)
		}
		if _, err := s.Save(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "rev", Value: "x"}}); !errors.Is(err, sturdy.ErrInvalidArgument) {
			t.Fatalf("bad version: %v", err)
		}
		if _, err := s.Write(ctx, 9, 0, bson.D{{Key: "rev", Value: 5}}, nil); !errors.Is(err, sturdy.ErrInvalidArgument) {
			t.Fatalf("setting the version: %v", err)
		}
	})
}

// Concurrent writers each add likes through Modify: every update lands, none
// is lost, and conflicts were detected and retried along the way.
func TestModifyConcurrentWritersLoseNoUpdate(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		for _, rw := range []bool{false, true} {
			t.Run(fmt.Sprint("retryWrites=", rw), func(t *testing.T) {
				_, target := connect(t, drv, rw)
				ctx := testCtx(t)
				s := newStore(t, target, false)
				const writers, per = 8, 15
				var wg sync.WaitGroup
				var mu sync.Mutex
				conflicts := 0
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < per; i++ {
							res, err := optimistic.Modify(ctx, s, "hot", func(a *article) error {
								a.Likes++
								a.Tags = append(a.Tags, fmt.Sprintf("w%d-%d", w, i))
								return nil
							}, &optimistic.ModifyOptions{MaxAttempts: 1000, CreateIfMissing: true})
							if err != nil {
								t.Errorf("Modify: %v", err)
								return
							}
							mu.Lock()
							conflicts += res.Conflicts
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				var got article
				v, err := s.Load(ctx, "hot", &got)
				must(t, err)
				if got.Likes != writers*per || len(got.Tags) != writers*per || v != writers*per {
					t.Fatalf("likes %d, tags %d, version %d; want %d", got.Likes, len(got.Tags), v, writers*per)
				}
				seen := map[string]bool{}
				for _, tag := range got.Tags {
					if seen[tag] {
						t.Fatalf("update %s applied twice", tag)
					}
					seen[tag] = true
				}
				if conflicts == 0 {
					t.Fatal("no conflict detected; the writers did not race")
				}
				t.Logf("%d conflicts detected and retried", conflicts)
			})
		}
	})
}

// The retry on conflict is bounded.
func TestModifyGivesUp(t *testing.T) {
	eachDriver(t, func(t *testing.T, drv driver) {
		_, target := connect(t, drv, false)
		ctx := testCtx(t)
		s := newStore(t, target, false)
		_, err := s.Save(ctx, &article{ID: "x", Title: "v1"})
		must(t, err)
		calls := 0
		_, err = optimistic.Modify(ctx, s, "x", func(a *article) error {
			calls++
			// Someone else saves in between, every time.
			_, err := s.Write(ctx, "x", a.Version, bson.D{{Key: "title", Value: fmt.Sprint("other", calls)}}, nil)
			return err
		}, &optimistic.ModifyOptions{MaxAttempts: 3})
		var ce *optimistic.ConflictError
		if !errors.As(err, &ce) || ce.ID != "x" || calls != 3 {
			t.Fatalf("err %v after %d calls", err, calls)
		}
		_, err = optimistic.Modify(ctx, s, "missing", func(*article) error { return nil })
		if !errors.Is(err, sturdy.ErrNoDocuments) {
			t.Fatalf("missing: %v", err)
		}
		boom := errors.New("boom")
		if _, err = optimistic.Modify(ctx, s, "x", func(*article) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("fn error: %v", err)
		}
	})
}
