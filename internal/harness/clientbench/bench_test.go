package clientbench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/sturdy-go/sturdy"
)

func TestMain(m *testing.M) {
	if serveChild() {
		return
	}
	code := m.Run()
	stopServers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// driver is one client doing the benchmarked operations. Each operation
// checks its result, so a benchmark cannot pass while doing nothing.
type driver struct {
	insertOne  func(ctx context.Context) error
	findOne    func(ctx context.Context, id int) error
	updateOne  func(ctx context.Context, id int) error
	insertMany func(ctx context.Context, docs []any) error
	drain      func(ctx context.Context) error
	insert     func(ctx context.Context, coll string, docs []any) error // for loading data
	drop       func(ctx context.Context, coll string) error
	close      func(ctx context.Context) error
}

var drivers = []struct {
	name    string
	connect func(ctx context.Context, uri string) (*driver, error)
}{
	{"sturdy", connectSturdy},
	{"official", connectOfficial},
}

// smallDoc is what insertOne inserts: no _id, so the driver generates one.
func smallDoc() bson.D {
	return bson.D{{Key: "x", Value: int32(1)}, {Key: "s", Value: "hello world"}}
}

func manyDocsSlice() []any {
	docs := make([]any, manyDocs)
	for i := range docs {
		docs[i] = bson.D{{Key: "x", Value: int32(i)}, {Key: "s", Value: "hello world"}}
	}
	return docs
}

// collOps adapts one client's collection to what the benchmarks call;
// newDriver adds the result checks, so both clients are checked alike.
type collOps struct {
	insertOne  func(ctx context.Context, doc any) error
	findOne    func(ctx context.Context, filter any) (bson.Raw, error)
	updateOne  func(ctx context.Context, filter, update any) (matched int64, err error)
	insertMany func(ctx context.Context, docs []any) (ids int, err error)
	find       func(ctx context.Context, filter any) (cursor, error)
	drop       func(ctx context.Context) error
}

// cursor is what both clients' cursors have in common.
type cursor interface {
	Next(ctx context.Context) bool
	Err() error
	Close(ctx context.Context) error
}

// newDriver builds the benchmarked operations over a client's collections
// of cannedDB; collection returns the adapter for one of them.
func newDriver(collection func(name string) collOps, disconnect func(ctx context.Context) error) *driver {
	one, upd, ins, many, drain := collection("one"), collection("update"), collection("ins"), collection("many"), collection("drain")
	return &driver{
		insertOne: func(ctx context.Context) error {
			return ins.insertOne(ctx, smallDoc())
		},
		findOne: func(ctx context.Context, id int) error {
			raw, err := one.findOne(ctx, bson.D{{Key: "_id", Value: int32(id % findDocs)}})
			if err != nil {
				return err
			}
			if _, err := raw.LookupErr("_id"); err != nil {
				return fmt.Errorf("findOne: document without _id: %v", raw)
			}
			return nil
		},
		updateOne: func(ctx context.Context, id int) error {
			matched, err := upd.updateOne(ctx, bson.D{{Key: "_id", Value: int32(id % updateDocs)}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}})
			if err != nil {
				return err
			}
			if matched != 1 {
				return fmt.Errorf("updateOne matched %d", matched)
			}
			return nil
		},
		insertMany: func(ctx context.Context, docs []any) error {
			ids, err := many.insertMany(ctx, docs)
			if err != nil {
				return err
			}
			if ids != len(docs) {
				return fmt.Errorf("insertMany: %d ids", ids)
			}
			return nil
		},
		drain: func(ctx context.Context) error {
			cur, err := drain.find(ctx, bson.D{})
			if err != nil {
				return err
			}
			n := 0
			for cur.Next(ctx) {
				n++
			}
			if err := cur.Err(); err != nil {
				return err
			}
			if err := cur.Close(ctx); err != nil {
				return err
			}
			if n != drainDocs {
				return fmt.Errorf("drain: %d documents", n)
			}
			return nil
		},
		insert: func(ctx context.Context, coll string, docs []any) error {
			_, err := collection(coll).insertMany(ctx, docs)
			return err
		},
		drop:  func(ctx context.Context, coll string) error { return collection(coll).drop(ctx) },
		close: disconnect,
	}
}

func connectSturdy(ctx context.Context, uri string) (*driver, error) {
	c, err := sturdy.Connect(ctx, uri)
	if err != nil {
		return nil, err
	}
	db := c.Database(cannedDB)
	return newDriver(func(name string) collOps {
		coll := db.Collection(name)
		return collOps{
			insertOne: func(ctx context.Context, doc any) error {
				_, err := coll.InsertOne(ctx, doc)
				return err
			},
			findOne: func(ctx context.Context, filter any) (bson.Raw, error) { return coll.FindOne(ctx, filter).Raw() },
			updateOne: func(ctx context.Context, filter, update any) (int64, error) {
				r, err := coll.UpdateOne(ctx, filter, update)
				if err != nil {
					return 0, err
				}
				return r.MatchedCount, nil
			},
			insertMany: func(ctx context.Context, docs []any) (int, error) {
				r, err := coll.InsertMany(ctx, docs)
				if err != nil {
					return 0, err
				}
				return len(r.InsertedIDs), nil
			},
			find: func(ctx context.Context, filter any) (cursor, error) { return coll.Find(ctx, filter) },
			drop: func(ctx context.Context) error { return coll.Drop(ctx) },
		}
	}, c.Disconnect), nil
}

func connectOfficial(ctx context.Context, uri string) (*driver, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return nil, err
	}
	db := c.Database(cannedDB)
	return newDriver(func(name string) collOps {
		coll := db.Collection(name)
		return collOps{
			insertOne: func(ctx context.Context, doc any) error {
				_, err := coll.InsertOne(ctx, doc)
				return err
			},
			findOne: func(ctx context.Context, filter any) (bson.Raw, error) { return coll.FindOne(ctx, filter).Raw() },
			updateOne: func(ctx context.Context, filter, update any) (int64, error) {
				r, err := coll.UpdateOne(ctx, filter, update)
				if err != nil {
					return 0, err
				}
				return r.MatchedCount, nil
			},
			insertMany: func(ctx context.Context, docs []any) (int, error) {
				r, err := coll.InsertMany(ctx, docs)
				if err != nil {
					return 0, err
				}
				return len(r.InsertedIDs), nil
			},
			find: func(ctx context.Context, filter any) (cursor, error) { return coll.Find(ctx, filter) },
			drop: func(ctx context.Context) error { return coll.Drop(ctx) },
		}
	}, c.Disconnect), nil
}

// workload is one benchmarked operation. prepare runs before and after
// the timed loop (dropping what the inserts add); run does operation i.
type workload struct {
	name    string
	prepare func(ctx context.Context, d *driver) error
	run     func(ctx context.Context, d *driver, i int) error
}

func workloads() []workload {
	docs := manyDocsSlice()
	dropping := func(coll string) func(ctx context.Context, d *driver) error {
		return func(ctx context.Context, d *driver) error { return d.drop(ctx, coll) }
	}
	return []workload{
		{"insertOne", dropping("ins"), func(ctx context.Context, d *driver, _ int) error { return d.insertOne(ctx) }},
		{"findOne", nil, func(ctx context.Context, d *driver, i int) error { return d.findOne(ctx, i) }},
		{"updateOne", nil, func(ctx context.Context, d *driver, i int) error { return d.updateOne(ctx, i) }},
		{"insertMany", dropping("many"), func(ctx context.Context, d *driver, _ int) error { return d.insertMany(ctx, docs) }},
		{"find", nil, func(ctx context.Context, d *driver, _ int) error { return d.drain(ctx) }},
	}
}

// simLoaded records that mongosim holds the read and update data.
var simLoaded sync.Once

// target is a server under the benchmarks: its kind and how to get it
// ready (mongosim needs its data loaded, once).
func targetURI(tb testing.TB, kind string) string {
	tb.Helper()
	uri, err := serverURI(kind)
	if err != nil {
		tb.Fatal(err)
	}
	if kind == "mongosim" {
		var err error
		simLoaded.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var d *driver
			if d, err = connectSturdy(ctx, uri); err != nil {
				return
			}
			defer d.close(ctx)
			err = loadSim(ctx, d.insert)
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return uri
}

func BenchmarkCanned(b *testing.B) { benchTarget(b, "canned") }
func BenchmarkSim(b *testing.B)    { benchTarget(b, "mongosim") }

func benchTarget(b *testing.B, kind string) {
	uri := targetURI(b, kind)
	for _, w := range workloads() {
		b.Run(w.name, func(b *testing.B) {
			for _, g := range []int{1, 32} {
				b.Run(fmt.Sprintf("g%d", g), func(b *testing.B) {
					for _, drv := range drivers {
						b.Run(drv.name, func(b *testing.B) {
							benchOne(b, uri, drv.connect, w, g)
						})
					}
				})
			}
		})
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	user, sys := cpuTimes()
	return user + sys
}

// cpuTimes is the process's user and system CPU time.
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// benchOne connects, warms g connections up, then runs b.N operations
// spread over g goroutines. Besides ns/op (wall time per operation, the
// inverse of throughput), B/op and allocs/op, it reports cpu-ns/op: the
// benchmark process's CPU time per operation, which with the server in
// another process is the client's whole cost, GC and background
// goroutines included.
func benchOne(b *testing.B, uri string, connect func(context.Context, string) (*driver, error), w workload, g int) {
	ctx := context.Background()
	d, err := connect(ctx, uri)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := d.close(ctx); err != nil {
			b.Error(err)
		}
	}()
	if w.prepare != nil {
		if err := w.prepare(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	// Warm-up: g concurrent operations, twice, so the pool holds the
	// connections the timed loop needs and lazy initialisation is done.
	if err := spread(ctx, g, 2*g, d, w); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	err = spread(ctx, g, b.N, d, w)
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	if w.prepare != nil {
		// Leave the server as it was: documents piling up in mongosim
		// would slow the benchmarks that follow (its GC scans them).
		if err := w.prepare(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
}

// spread runs n operations of w on g goroutines and returns the first error.
func spread(ctx context.Context, g, n int, d *driver, w workload) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := w.run(ctx, d, i); err != nil {
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("%s operation %d: %w", w.name, i, err)
					}
					errMu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// TestWorkloads runs every workload a few times with both drivers against
// both servers: the canned replies must satisfy each driver's result checks
// exactly as mongosim's do, or the benchmarks would measure error paths.
func TestWorkloads(t *testing.T) {
	for _, kind := range []string{"canned", "mongosim"} {
		uri := targetURI(t, kind)
		for _, drv := range drivers {
			t.Run(kind+"/"+drv.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				d, err := drv.connect(ctx, uri)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := d.close(ctx); err != nil {
						t.Error(err)
					}
				}()
				for _, w := range workloads() {
					if w.prepare != nil {
						if err := w.prepare(ctx, d); err != nil {
							t.Fatalf("%s: prepare: %v", w.name, err)
						}
					}
					if err := spread(ctx, 4, 8, d, w); err != nil {
						t.Errorf("%s: %v", w.name, err)
					}
				}
			})
		}
	}
}
