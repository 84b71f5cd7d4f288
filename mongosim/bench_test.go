package mongosim

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// reportOps adds an ops/s metric: operations over wall-clock time, which
// is what parallel clients achieve together.
func reportOps(b *testing.B, start time.Time) {
	if s := time.Since(start).Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}

func BenchmarkInsertOne(b *testing.B) {
	client, _ := dataClient(b)
	coll := client.Database("bench").Collection("insert")
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: next.Add(1)}, {Key: "v", Value: "payload"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}

func BenchmarkFindOneByID(b *testing.B) {
	client, _ := dataClient(b)
	coll := client.Database("bench").Collection("find")
	ctx := context.Background()
	const docs = 1000
	batch := make([]any, docs)
	for i := range batch {
		batch[i] = bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "payload"}, {Key: "n", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, batch); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var doc bson.Raw
		for pb.Next() {
			id := int(next.Add(1) % docs)
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}

func BenchmarkUpdateOne(b *testing.B) {
	client, _ := dataClient(b)
	coll := client.Database("bench").Collection("update")
	ctx := context.Background()
	const docs = 100
	batch := make([]any, docs)
	for i := range batch {
		batch[i] = bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}
	}
	if _, err := coll.InsertMany(ctx, batch); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := int(next.Add(1) % docs)
			if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
}

// BenchmarkTransactionsDisjoint runs transactions in parallel, each
// goroutine moving a unit between its own two documents: nothing conflicts,
// so throughput shows whether unrelated transactions serialise.
func BenchmarkTransactionsDisjoint(b *testing.B) {
	for _, size := range []int{0, 10000} {
		b.Run(fmt.Sprintf("others=%d", size), func(b *testing.B) { benchTransactionsDisjoint(b, size) })
	}
}

// benchTransactionsDisjoint: others is how many unrelated documents the
// collection holds besides the ones the transactions write.
func benchTransactionsDisjoint(b *testing.B, others int) {
	client, _ := dataClient(b)
	coll := client.Database("bench").Collection("txn")
	ctx := context.Background()
	if others > 0 {
		docs := make([]any, others)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "v", Value: "payload"}}
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	var worker, attempts atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		from, to := fmt.Sprintf("w%d-a", w), fmt.Sprintf("w%d-b", w)
		if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: from}, {Key: "n", Value: 0}}, bson.D{{Key: "_id", Value: to}, {Key: "n", Value: 0}}}); err != nil {
			b.Error(err)
			return
		}
		s, err := client.StartSession()
		if err != nil {
			b.Error(err)
			return
		}
		defer s.EndSession(ctx)
		for pb.Next() {
			_, err := s.WithTransaction(ctx, func(sctx context.Context) (any, error) {
				attempts.Add(1)
				if _, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: from}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: -1}}}}); err != nil {
					return nil, err
				}
				_, err := coll.UpdateOne(sctx, bson.D{{Key: "_id", Value: to}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				return nil, err
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b, start)
	b.ReportMetric(float64(attempts.Load()-int64(b.N)), "retries")
}
