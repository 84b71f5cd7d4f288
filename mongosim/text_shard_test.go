package mongosim

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// TestTextSearchThroughRouters: a text index created through a router
// reaches every shard, and $text finds the matching documents of all of
// them; a textScore sort across shards is NotImplemented.
func TestTextSearchThroughRouters(t *testing.T) {
	client, _ := shardedClient(t, 2, nil)
	ctx := sdCtx(t)
	shardCollection(t, ctx, client, "textdb.sharded", bson.D{{Key: "_id", Value: "hashed"}})
	c := client.Database("textdb").Collection("sharded")
	createTextIndex(t, ctx, c, bson.D{{Key: "t", Value: "text"}}, nil)
	docs := make([]any, 40)
	for i := range docs {
		t := "plain words"
		if i%4 == 0 {
			t = "roasted coffee beans"
		}
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "t", Value: t}}
	}
	_, err := c.InsertMany(ctx, docs)
	sdNoErr(t, err)
	n, err := c.CountDocuments(ctx, search("coffee"))
	sdNoErr(t, err)
	if n != 10 {
		t.Errorf("count through routers: %d, want 10", n)
	}
	cur, err := c.Find(ctx, search("bean"), options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	sdNoErr(t, err)
	var got []bson.D
	sdNoErr(t, cur.All(ctx, &got))
	if len(got) != 10 || got[0][0].Value != int32(0) || len(got[0]) != 2 {
		t.Errorf("find through routers: %v", got)
	}
	meta := bson.D{{Key: "$meta", Value: "textScore"}}
	_, err = c.Find(ctx, search("bean"), options.Find().SetSort(bson.D{{Key: "s", Value: meta}}))
	commandError(t, err, cmderr.NotImplemented)
	cur, err = c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: search("coffee")}},
		{{Key: "$project", Value: bson.D{{Key: "s", Value: meta}}}},
		{{Key: "$sort", Value: bson.D{{Key: "s", Value: -1}, {Key: "_id", Value: 1}}}},
		{{Key: "$limit", Value: 3}},
	})
	sdNoErr(t, err)
	got = nil
	sdNoErr(t, cur.All(ctx, &got))
	want := termScore(1, 1, 3, false) // roast coffe bean
	if len(got) != 3 || got[0][0].Value != int32(0) || got[0][1].Value != want {
		t.Errorf("aggregate through routers: %v (want scores %v)", got, want)
	}
	// The router's part of the pipeline (from the $sort on) has no scores.
	_, err = c.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: search("coffee")}},
		{{Key: "$sort", Value: bson.D{{Key: "s", Value: meta}}}},
	})
	commandError(t, err, cmderr.NotImplemented)
}
