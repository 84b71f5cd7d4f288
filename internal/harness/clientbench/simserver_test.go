package clientbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkSimServer measures mongosim alone: the official driver sends
// insert of 1 000-document batches and a find that drains the preloaded
// 10 000 documents, from one goroutine, and the benchmark reports the
// server process's CPU time per document (server-cpu-ns/doc), read from
// the child's rusage before and after the timed loop. The single-document
// cells (findOne by _id, updateOne $inc by _id, insertOne) store or return
// one document per command, so there server-cpu-ns/doc is the server's CPU
// per command. server-user-ns/doc is the part of it spent in user mode
// (mongosim's code and the Go runtime), without the kernel's socket and
// scheduling work, which dominates the small commands and varies most
// with the machine's load. server-allocs/doc counts the heap objects the
// server process allocated (runtime/metrics), whose GC is a large part of
// a small command's user time. To profile the server, set
// CLIENTBENCH_SERVE_CPUPROFILE to a file name: the child writes its CPU
// profile there when the benchmark binary exits.
//
//	go test -run '^$' -bench SimServer -benchtime 50x ./internal/harness/clientbench
//	go test -run '^$' -bench 'SimServer/(findOne|updateOne|insertOne)' -benchtime 20000x ./internal/harness/clientbench
func BenchmarkSimServer(b *testing.B) {
	uri := targetURI(b, "mongosim")
	ctx := context.Background()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Disconnect(ctx); err != nil {
			b.Error(err)
		}
	}()
	db := c.Database(cannedDB)
	docs := make([]any, manyDocs)
	for i := range docs {
		docs[i] = bson.D{{Key: "x", Value: int32(i)}, {Key: "s", Value: "hello world"}}
	}
	ins := db.Collection("srvins")
	b.Run("insert1000", func(b *testing.B) {
		serverBench(b, manyDocs, func() error { return ins.Drop(ctx) }, func() error {
			r, err := ins.InsertMany(ctx, docs)
			if err == nil && len(r.InsertedIDs) != manyDocs {
				err = fmt.Errorf("insertMany: %d ids", len(r.InsertedIDs))
			}
			return err
		})
	})
	drain := db.Collection("drain")
	b.Run("find10000", func(b *testing.B) {
		serverBench(b, drainDocs, nil, func() error {
			cur, err := drain.Find(ctx, bson.D{})
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
			if n != drainDocs {
				return fmt.Errorf("find: %d documents", n)
			}
			return cur.Close(ctx)
		})
	})
	simServerSingle(b, db)
}

// simServerSingle adds BenchmarkSimServer's per-command cells: findOne and
// updateOne by _id on the preloaded collections, and insertOne of a small
// document (the driver generates its _id) into a collection dropped before
// and after.
func simServerSingle(b *testing.B, db *mongo.Database) {
	ctx := context.Background()
	one, upd, ins := db.Collection("one"), db.Collection("update"), db.Collection("srvins1")
	i := 0
	b.Run("findOne", func(b *testing.B) {
		serverBench(b, 1, nil, func() error {
			i++
			raw, err := one.FindOne(ctx, bson.D{{Key: "_id", Value: int32(i % findDocs)}}).Raw()
			if err != nil {
				return err
			}
			if _, err := raw.LookupErr("_id"); err != nil {
				return fmt.Errorf("findOne: document without _id: %v", raw)
			}
			return nil
		})
	})
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}}
	b.Run("updateOne", func(b *testing.B) {
		serverBench(b, 1, nil, func() error {
			i++
			r, err := upd.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(i % updateDocs)}}, inc)
			if err == nil && r.MatchedCount != 1 {
				err = fmt.Errorf("updateOne matched %d", r.MatchedCount)
			}
			return err
		})
	})
	b.Run("insertOne", func(b *testing.B) {
		serverBench(b, 1, func() error { return ins.Drop(ctx) }, func() error {
			_, err := ins.InsertOne(ctx, bson.D{{Key: "x", Value: int32(1)}, {Key: "s", Value: "hello world"}})
			return err
		})
	})
}

// serverBench runs op b.N times (after one warm-up) and reports the server
// process's CPU per document, docs being what one op stores or returns
// (1 for the single-document cells: then it is the CPU per command).
// reset, if any, runs before and after, leaving the server as it was.
func serverBench(b *testing.B, docs int, reset, op func() error) {
	if reset != nil {
		if err := reset(); err != nil {
			b.Fatal(err)
		}
	}
	if err := op(); err != nil {
		b.Fatal(err)
	}
	cpu0, err := serverCPU("mongosim")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu1, err := serverCPU("mongosim")
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N * docs)
	b.ReportMetric(float64((cpu1.total()-cpu0.total()).Nanoseconds())/n, "server-cpu-ns/doc")
	b.ReportMetric(float64((cpu1.user-cpu0.user).Nanoseconds())/n, "server-user-ns/doc")
	b.ReportMetric(float64(cpu1.allocs-cpu0.allocs)/n, "server-allocs/doc")
	b.ReportMetric(n/elapsed.Seconds(), "docs/s")
	if reset != nil {
		if err := reset(); err != nil {
			b.Fatal(err)
		}
	}
}
