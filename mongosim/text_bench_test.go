package mongosim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// BenchmarkTextSearchVsRegex compares a $text query answered by the text
// index with a regex collection scan finding the same documents, over
// 100 000 documents of which about 1% hold the word. It reports each
// query's time and regex-ms/text-ms as "regex/text".
func BenchmarkTextSearchVsRegex(b *testing.B) {
	client, _ := dataClient(b)
	ctx := context.Background()
	coll := client.Database("bench").Collection("text")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "t", Value: "text"}}}); err != nil {
		b.Fatal(err)
	}
	const docs, batch = 100_000, 5_000
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 2000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx", i)
	}
	want := 0
	for start := 0; start < docs; start += batch {
		page := make([]any, batch)
		for i := range page {
			words := make([]string, 8)
			for j := range words {
				words[j] = vocab[rng.IntN(len(vocab))]
			}
			if rng.IntN(100) == 0 {
				words[rng.IntN(len(words))] = "espresso"
				want++
			}
			page[i] = bson.D{{Key: "_id", Value: start + i}, {Key: "t", Value: strings.Join(words, " ")}}
		}
		if _, err := coll.InsertMany(ctx, page); err != nil {
			b.Fatal(err)
		}
	}
	count := func(filter bson.D) int {
		cur, err := coll.Find(ctx, filter)
		if err != nil {
			b.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			b.Fatal(err)
		}
		return len(out)
	}
	text := bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "espresso"}}}}
	regex := bson.D{{Key: "t", Value: bson.Regex{Pattern: `\bespresso\b`}}}
	var textTime, regexTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		n := count(text)
		t1 := time.Now()
		m := count(regex)
		textTime += t1.Sub(t0)
		regexTime += time.Since(t1)
		if n != want || m != want {
			b.Fatalf("$text found %d, regex %d, want %d", n, m, want)
		}
	}
	b.ReportMetric(float64(textTime.Microseconds())/1000/float64(b.N), "text-ms/op")
	b.ReportMetric(float64(regexTime.Microseconds())/1000/float64(b.N), "regex-ms/op")
	b.ReportMetric(float64(regexTime)/float64(textTime), "regex/text")
}
