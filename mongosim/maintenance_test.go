package mongosim

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func dbCmd(t *testing.T, db *mongo.Database, cmd bson.D) (bson.D, error) {
	t.Helper()
	var out bson.D
	err := db.RunCommand(sdCtx(t), cmd).Decode(&out)
	return out, err
}

func field(d bson.D, k string) any {
	v, _ := lookupD(d, k)
	return v
}

func TestFsyncLockBlocksWrites(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	admin := client.Database("admin")
	db := client.Database("fs")
	reply, err := dbCmd(t, admin, bson.D{{Key: "fsync", Value: 1}})
	sdNoErr(t, err)
	if field(reply, "numFiles") != int32(1) {
		t.Fatalf("fsync: %v", reply)
	}
	if _, err := dbCmd(t, db, bson.D{{Key: "fsync", Value: 1}}); sdCode(err) != 13 {
		t.Fatalf("fsync outside admin: %v, want 13", err)
	}
	for want := int64(1); want <= 2; want++ {
		reply, err = dbCmd(t, admin, bson.D{{Key: "fsync", Value: 1}, {Key: "lock", Value: true}})
		sdNoErr(t, err)
		if field(reply, "lockCount") != want || field(reply, "info") != "now locked against writes, use db.fsyncUnlock() to unlock" {
			t.Fatalf("fsync lock %d: %v", want, reply)
		}
	}
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: 1}}}}, {Key: "maxTimeMS", Value: 100}}
	if _, err := dbCmd(t, db, insert); sdCode(err) != 50 {
		t.Fatalf("insert while locked: %v, want 50 MaxTimeMSExpired", err)
	}
	// Reads go on.
	if _, err := db.Collection("c").CountDocuments(ctx, bson.D{}); err != nil {
		t.Fatalf("count while locked: %v", err)
	}
	reply, err = dbCmd(t, admin, bson.D{{Key: "fsyncUnlock", Value: 1}})
	sdNoErr(t, err)
	if field(reply, "lockCount") != int64(1) || field(reply, "info") != "fsyncUnlock completed" {
		t.Fatalf("fsyncUnlock: %v", reply)
	}
	if _, err := dbCmd(t, db, insert); sdCode(err) != 50 {
		t.Fatalf("insert while still locked once: %v, want 50", err)
	}
	// killOp ends a write waiting for the lock: 11601 Interrupted, as mongod.
	killed := make(chan error, 1)
	go func() {
		_, err := dbCmd(t, db, insert[:2])
		killed <- err
	}()
	mustRun(t, ctx, admin, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opInProgress(t, ctx, admin, "documents")}})
	if err := <-killed; sdCode(err) != 11601 {
		t.Fatalf("insert killed while locked: %v, want 11601 Interrupted", err)
	}
	// A write waiting without a time limit proceeds at the last unlock.
	done := make(chan error, 1)
	go func() {
		_, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 2}})
		done <- err
	}()
	reply, err = dbCmd(t, admin, bson.D{{Key: "fsyncUnlock", Value: 1}})
	sdNoErr(t, err)
	if field(reply, "lockCount") != int64(0) {
		t.Fatalf("last fsyncUnlock: %v", reply)
	}
	sdNoErr(t, <-done)
	if _, err := dbCmd(t, admin, bson.D{{Key: "fsyncUnlock", Value: 1}}); sdCode(err) != 20 {
		t.Fatalf("fsyncUnlock when not locked: %v, want 20 IllegalOperation", err)
	}
}

func TestValidateCommand(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("val")
	coll := db.Collection("c")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "tags", Value: bson.A{"a", "b"}}},
		bson.D{{Key: "tags", Value: "c"}, {Key: "s", Value: 1}},
		bson.D{},
	})
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "tags", Value: 1}}},
		{Keys: bson.D{{Key: "s", Value: 1}}, Options: options.Index().SetSparse(true)},
	})
	sdNoErr(t, err)
	reply, err := dbCmd(t, db, bson.D{{Key: "validate", Value: "c"}, {Key: "full", Value: true}})
	sdNoErr(t, err)
	if field(reply, "valid") != true || field(reply, "nrecords") != int32(3) || field(reply, "nIndexes") != int32(3) || field(reply, "ns") != "val.c" {
		t.Fatalf("validate: %v", reply)
	}
	keys := field(reply, "keysPerIndex").(bson.D)
	if field(keys, "_id_") != int32(3) || field(keys, "tags_1") != int32(4) || field(keys, "s_1") != int32(1) {
		t.Fatalf("keysPerIndex: %v", keys)
	}
	details := field(reply, "indexDetails").(bson.D)
	if len(details) != 3 || field(field(details, "tags_1").(bson.D), "valid") != true {
		t.Fatalf("indexDetails: %v", details)
	}
	for _, k := range []string{"warnings", "errors", "extraIndexEntries", "missingIndexEntries", "corruptRecords"} {
		if a, ok := field(reply, k).(bson.A); !ok || len(a) != 0 {
			t.Fatalf("%s: %v", k, field(reply, k))
		}
	}
	if _, err := dbCmd(t, db, bson.D{{Key: "validate", Value: "missing"}}); sdCode(err) != 26 {
		t.Fatalf("validate of a missing collection: %v, want 26", err)
	}
}

func TestProfileCommand(t *testing.T) {
	client, _ := dataClient(t)
	db := client.Database("prof")
	reply, err := dbCmd(t, db, bson.D{{Key: "profile", Value: 2}, {Key: "slowms", Value: 50}})
	sdNoErr(t, err)
	if field(reply, "was") != int32(0) || field(reply, "slowms") != int32(100) || field(reply, "sampleRate") != 1.0 {
		t.Fatalf("profile 2: %v", reply)
	}
	reply, err = dbCmd(t, db, bson.D{{Key: "profile", Value: -1}})
	sdNoErr(t, err)
	if field(reply, "was") != int32(2) || field(reply, "slowms") != int32(50) {
		t.Fatalf("profile -1: %v", reply)
	}
	// Levels are per database.
	reply, err = dbCmd(t, client.Database("other"), bson.D{{Key: "profile", Value: 1}})
	sdNoErr(t, err)
	if field(reply, "was") != int32(0) {
		t.Fatalf("profile on another database: %v", reply)
	}
	reply, err = dbCmd(t, db, bson.D{{Key: "profile", Value: 0}})
	sdNoErr(t, err)
	if field(reply, "was") != int32(2) {
		t.Fatalf("profile 0: %v", reply)
	}
	if _, err := dbCmd(t, db, bson.D{{Key: "profile", Value: 3}}); sdCode(err) != 2 {
		t.Fatalf("profile 3: %v, want 2 BadValue", err)
	}
}

func TestIndexBackgroundAndDropDups(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("ixopts")
	_, err := dbCmd(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "background", Value: true}, {Key: "dropDups", Value: true}},
	}}})
	sdNoErr(t, err)
	cur, err := db.Collection("c").Indexes().List(ctx)
	sdNoErr(t, err)
	var specs []bson.D
	sdNoErr(t, cur.All(ctx, &specs))
	if len(specs) != 2 || field(specs[1], "background") != true || field(specs[1], "dropDups") != true {
		t.Fatalf("listIndexes: %v", specs)
	}
	_, err = dbCmd(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "b_1"}, {Key: "background", Value: "yes"}},
	}}})
	if sdCode(err) != 14 {
		t.Fatalf("background: \"yes\": %v, want 14 TypeMismatch", err)
	}
}

func TestProfilerRecordsOperations(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("prof2")
	coll := db.Collection("c")
	_, err := dbCmd(t, db, bson.D{{Key: "profile", Value: 2}})
	sdNoErr(t, err)
	_, err = coll.InsertMany(ctx, []any{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}})
	sdNoErr(t, err)
	sdFindAll(t, ctx, coll, bson.D{{Key: "x", Value: 1}})
	_, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}})
	sdNoErr(t, err)
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "x", Value: 2}})
	sdNoErr(t, err)
	_, err = dbCmd(t, db, bson.D{{Key: "profile", Value: 0}})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "x", Value: 3}}) // not profiled
	sdNoErr(t, err)

	entries := sdFindAll(t, ctx, db.Collection("system.profile"), bson.D{{Key: "ns", Value: "prof2.c"}})
	var ops []string
	for _, e := range entries {
		ops = append(ops, field(e, "op").(string))
	}
	if fmt.Sprint(ops) != "[insert query update remove]" {
		t.Fatalf("profiled ops %v: %v", ops, entries)
	}
	if field(entries[0], "ninserted") != int32(2) || field(entries[1], "nreturned") != int32(1) ||
		field(entries[2], "nModified") != int32(2) || field(entries[3], "ndeleted") != int32(1) {
		t.Fatalf("entry counters: %v", entries)
	}
	cmd, _ := field(entries[1], "command").(bson.D)
	if field(cmd, "find") != "c" || field(entries[1], "protocol") != "op_msg" || field(entries[1], "millis") == nil {
		t.Fatalf("query entry: %v", entries[1])
	}
	// A filter decides alone which operations are recorded.
	_, err = dbCmd(t, db, bson.D{{Key: "profile", Value: 1}, {Key: "filter", Value: bson.D{{Key: "op", Value: "remove"}}}})
	sdNoErr(t, err)
	sdFindAll(t, ctx, coll, bson.D{})
	_, err = coll.DeleteMany(ctx, bson.D{})
	sdNoErr(t, err)
	_, err = dbCmd(t, db, bson.D{{Key: "profile", Value: 0}, {Key: "filter", Value: "unset"}})
	sdNoErr(t, err)
	n, err := db.Collection("system.profile").CountDocuments(ctx, bson.D{{Key: "ns", Value: "prof2.c"}})
	sdNoErr(t, err)
	if n != 5 {
		t.Fatalf("%d entries after the filtered period, want 5 (one more remove)", n)
	}
}
