package sturdy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/event"
	"github.com/sturdy-go/sturdy/mongosim"
)

// payload is the string document i carries: long enough that a batch of a
// few hundred documents is read into a pooled buffer, and different for
// every document, so a document overwritten by another batch shows.
func payload(i int) string { return strings.Repeat(fmt.Sprintf("<%d>", i), 20) }

// loadRecycleDocs inserts n documents {_id: i, p: payload(i)}.
func loadRecycleDocs(ctx context.Context, t *testing.T, coll *sturdy.Collection, n int) {
	t.Helper()
	docs := make([]any, n)
	for i := range docs {
		docs[i] = d("_id", i, "p", payload(i))
	}
	if _, err := coll.InsertMany(ctx, docs, nil); err != nil {
		t.Fatal(err)
	}
}

// checkRecycleDoc checks that doc is document i, intact.
func checkRecycleDoc(doc bson.Raw, i int) error {
	id, ok := doc.Lookup("_id").AsInt64OK()
	p, _ := doc.Lookup("p").StringValueOK()
	if !ok || id != int64(i) || p != payload(i) {
		return fmt.Errorf("document %d reads as _id %d, p %.20q…", i, id, p)
	}
	return nil
}

// TestCursorRecyclesConsumedBatches drains cursors from several goroutines
// at once, so batch buffers one cursor hands back are read into by the
// others: every document must read as it was stored, a cursor must hold a
// pooled buffer while in a large batch and let it go once exhausted, and
// what was handed out by FindOne (a closed cursor's Current) and to a
// command-succeeded listener must stay intact throughout.
func TestCursorRecyclesConsumedBatches(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	c := connect(t, cluster.URI(), nil)
	coll := c.Database("db").Collection("recycle")
	const n, batch, readers = 3000, 400, 4
	loadRecycleDocs(ctx, t, coll, n)

	// A document big enough for FindOne's reply to be read into a pooled
	// buffer, which the closed cursor must leave alone.
	big := c.Database("db").Collection("big")
	bigText := strings.Repeat(payload(7), 800) // 48 KB: the size class of the batches below
	if _, err := big.InsertOne(ctx, d("_id", 7, "p", bigText)); err != nil {
		t.Fatal(err)
	}
	keptRaw, err := big.FindOne(ctx, d("_id", 7)).Raw()
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu        sync.Mutex
		succeeded []bson.Raw // getMore replies as a listener received them
		copies    []string   // and as they were then
	)
	watched := connect(t, cluster.URI(), func(o *sturdy.Options) {
		o.Monitor = &event.Monitor{CommandSucceeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.CommandName == "getMore" {
				mu.Lock()
				succeeded, copies = append(succeeded, e.Reply), append(copies, string(e.Reply))
				mu.Unlock()
			}
		}}
	})

	// A listener may keep the replies it is handed: they are not recycled.
	drain := func(coll *sturdy.Collection, listened bool) error {
		cur, err := coll.Find(ctx, nil, &sturdy.FindOptions{BatchSize: batch, Sort: d("_id", 1)})
		if err != nil {
			return err
		}
		defer cur.Close(ctx)
		i := 0
		for cur.Next(ctx) {
			if err := checkRecycleDoc(cur.Current, i); err != nil {
				return err
			}
			if pooled := sturdy.CursorHoldsPooledBuffer(cur); i >= batch && pooled == listened {
				return fmt.Errorf("document %d: a %d-document batch pooled: %v, want %v (listener: %v)", i, batch, pooled, !listened, listened)
			}
			i++
		}
		if err := cur.Err(); err != nil {
			return err
		}
		if i != n {
			return fmt.Errorf("drained %d documents of %d", i, n)
		}
		if sturdy.CursorHoldsPooledBuffer(cur) {
			return fmt.Errorf("the exhausted cursor still holds its last batch's buffer")
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*readers)
	for r := range 2 * readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, listened := coll, r%2 == 1
			if listened {
				from = watched.Database("db").Collection("recycle")
			}
			for range 3 {
				if err := drain(from, listened); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p, _ := keptRaw.Lookup("p").StringValueOK(); p != bigText {
		t.Errorf("FindOne's document changed under it: p %.20q…", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(succeeded) == 0 {
		t.Fatal("no getMore succeeded event")
	}
	for i, r := range succeeded {
		if string(r) != copies[i] {
			t.Fatalf("getMore reply %d handed to the listener changed afterwards", i)
		}
	}
}

// TestRecycledOperationStateKeepsResults runs single-document operations
// from several goroutines, so the find operations, FindOne cursors and
// statement buffers the client recycles are reused at once: every document
// FindOne returned must still read as itself at the end, and a caller's own
// bson.Raw document must come back from InsertOne untouched.
func TestRecycledOperationStateKeepsResults(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	coll := connect(t, cluster.URI(), nil).Database("db").Collection("recycled")
	const workers, each = 4, 50
	raws := make([]bson.Raw, workers*each)
	for i := range raws {
		b, err := bson.Marshal(d("_id", i, "p", payload(i)))
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = b
	}
	kept := make([]bson.Raw, len(raws))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * each; i < (w+1)*each; i++ {
				before := string(raws[i])
				if _, err := coll.InsertOne(ctx, raws[i]); err != nil {
					errs <- err
					return
				}
				if string(raws[i]) != before {
					errs <- fmt.Errorf("InsertOne changed the caller's document %d", i)
					return
				}
				res, err := coll.UpdateOne(ctx, d("_id", i), d("$set", d("u", i)))
				if err != nil || res.MatchedCount != 1 {
					errs <- fmt.Errorf("updateOne %d: %v, %+v", i, err, res)
					return
				}
				if kept[i], err = coll.FindOne(ctx, d("_id", i)).Raw(); err != nil {
					errs <- err
					return
				}
				if err := coll.FindOne(ctx, d("_id", -1)).Err(); err != sturdy.ErrNoDocuments {
					errs <- fmt.Errorf("FindOne of nothing: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, doc := range kept {
		if err := checkRecycleDoc(doc, i); err != nil {
			t.Error(err)
		}
		if u, _ := doc.Lookup("u").AsInt64OK(); u != int64(i) {
			t.Errorf("document %d: u = %d after its update", i, u)
		}
	}
}
