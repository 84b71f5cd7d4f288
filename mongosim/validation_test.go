package mongosim

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

var userSchema = bson.D{{Key: "$jsonSchema", Value: bson.D{
	{Key: "bsonType", Value: "object"},
	{Key: "required", Value: bson.A{"name", "age"}},
	{Key: "additionalProperties", Value: false},
	{Key: "properties", Value: bson.D{
		{Key: "_id", Value: bson.D{}},
		{Key: "name", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "minLength", Value: 2}, {Key: "maxLength", Value: 10},
			{Key: "pattern", Value: "^[a-z]+$"}, {Key: "description", Value: "lower-case name"}}},
		{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: 0}, {Key: "maximum", Value: 150}}},
		{Key: "role", Value: bson.D{{Key: "enum", Value: bson.A{"admin", "user"}}}},
		{Key: "tags", Value: bson.D{{Key: "bsonType", Value: "array"}, {Key: "items", Value: bson.D{{Key: "bsonType", Value: "string"}}}}},
	}},
}}}

// writeErrInfo returns the errInfo of the first write error (or the
// command error) of err.
func writeErrInfo(t *testing.T, err error) bson.Raw {
	t.Helper()
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return we.WriteErrors[0].Details
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Raw.Lookup("errInfo").Document()
	}
	t.Fatalf("not a write or command error: %v", err)
	return nil
}

func TestValidatorJSONSchema(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("val")
	sdNoErr(t, db.CreateCollection(ctx, "users", options.CreateCollection().SetValidator(userSchema)))
	users := db.Collection("users")

	_, err := users.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}, {Key: "age", Value: int32(30)}, {Key: "role", Value: "admin"}, {Key: "tags", Value: bson.A{"a"}}})
	sdNoErr(t, err)

	bad := []struct {
		name string
		doc  bson.D
		rule string // operatorName expected somewhere in schemaRulesNotSatisfied
		want string // a fragment of the errInfo
	}{
		{"wrong type", bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: 5}, {Key: "age", Value: int32(1)}}, "properties", `"reason": "type did not match"`},
		{"missing", bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "bo"}}, "required", `"missingProperties": ["age"]`},
		{"minimum", bson.D{{Key: "_id", Value: 4}, {Key: "name", Value: "cy"}, {Key: "age", Value: int32(-1)}}, "properties", `"operatorName": "minimum"`},
		{"maximum", bson.D{{Key: "_id", Value: 5}, {Key: "name", Value: "cy"}, {Key: "age", Value: int32(151)}}, "properties", `"operatorName": "maximum"`},
		{"enum", bson.D{{Key: "_id", Value: 6}, {Key: "name", Value: "cy"}, {Key: "age", Value: int32(1)}, {Key: "role", Value: "root"}}, "properties", `"reason": "value was not found in enum"`},
		{"pattern", bson.D{{Key: "_id", Value: 7}, {Key: "name", Value: "Cy"}, {Key: "age", Value: int32(1)}}, "properties", `"reason": "regular expression did not match"`},
		{"minLength", bson.D{{Key: "_id", Value: 8}, {Key: "name", Value: "c"}, {Key: "age", Value: int32(1)}}, "properties", `"operatorName": "minLength"`},
		{"maxLength", bson.D{{Key: "_id", Value: 9}, {Key: "name", Value: "abcdefghijk"}, {Key: "age", Value: int32(1)}}, "properties", `"operatorName": "maxLength"`},
		{"items", bson.D{{Key: "_id", Value: 10}, {Key: "name", Value: "cy"}, {Key: "age", Value: int32(1)}, {Key: "tags", Value: bson.A{"a", 2}}}, "properties", `"itemIndex": {"$numberInt":"1"}`},
		{"additionalProperties", bson.D{{Key: "_id", Value: 11}, {Key: "name", Value: "cy"}, {Key: "age", Value: int32(1)}, {Key: "x", Value: 1}}, "additionalProperties", `"additionalProperties": ["x"]`},
	}
	for _, tc := range bad {
		_, err := users.InsertOne(ctx, tc.doc)
		if cmdErrCode(err) != 121 {
			t.Fatalf("%s: %v, want DocumentValidationFailure", tc.name, err)
		}
		info := writeErrInfo(t, err)
		if id := info.Lookup("failingDocumentId"); id.AsInt64() != int64(tc.doc[0].Value.(int)) {
			t.Fatalf("%s: failingDocumentId = %v", tc.name, id)
		}
		details := info.Lookup("details").Document()
		if op := details.Lookup("operatorName").StringValue(); op != "$jsonSchema" {
			t.Fatalf("%s: details.operatorName = %q", tc.name, op)
		}
		rules, _ := details.Lookup("schemaRulesNotSatisfied").Array().Values()
		found := false
		for _, r := range rules {
			if r.Document().Lookup("operatorName").StringValue() == tc.rule {
				found = true
			}
		}
		if !found || !strings.Contains(info.String(), tc.want) {
			t.Fatalf("%s: errInfo %s lacks rule %q / %s", tc.name, info, tc.rule, tc.want)
		}
	}
	if tc := bad[0]; !strings.Contains(writeErrInfo(t, mustFail(t, users, bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: 5}, {Key: "age", Value: int32(1)}})).String(), `"description": "lower-case name"`) {
		t.Fatalf("%s: the property's description is missing", tc.name)
	}

	// Updates are validated too, and nothing changes when they fail.
	_, err = users.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "age", Value: "old"}}}})
	if cmdErrCode(err) != 121 {
		t.Fatalf("update: %v", err)
	}
	err = users.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "name", Value: ""}}}}).Err()
	if cmdErrCode(err) != 121 {
		t.Fatalf("findAndModify: %v", err)
	}
	if info := writeErrInfo(t, err); !strings.Contains(info.String(), `"missingProperties": ["name"]`) {
		t.Fatalf("findAndModify errInfo = %s", info)
	}
	_, err = users.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "name", Value: "ann"}})
	if cmdErrCode(err) != 121 {
		t.Fatalf("replace: %v", err)
	}
	_, err = users.UpdateOne(ctx, bson.D{{Key: "_id", Value: 99}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "zed"}}}}, options.UpdateOne().SetUpsert(true))
	if cmdErrCode(err) != 121 {
		t.Fatalf("upsert: %v", err)
	}
	var got bson.M
	sdNoErr(t, users.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got))
	if got["age"] != int32(30) || got["name"] != "ann" {
		t.Fatalf("a failed update changed the document: %v", got)
	}
	n, err := users.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 1 {
		t.Fatalf("%d documents, want 1", n)
	}

	// listCollections shows the validator with its level and action.
	cur, err := db.ListCollections(ctx, bson.D{{Key: "name", Value: "users"}})
	sdNoErr(t, err)
	var specs []bson.Raw
	sdNoErr(t, cur.All(ctx, &specs))
	opts := specs[0].Lookup("options").Document()
	if opts.Lookup("validationLevel").StringValue() != "strict" || opts.Lookup("validationAction").StringValue() != "error" {
		t.Fatalf("options = %s", opts)
	}
	if _, err := opts.Lookup("validator", "$jsonSchema", "required").Array().Values(); err != nil {
		t.Fatalf("options.validator = %s", opts)
	}
}

func mustFail(t *testing.T, c *mongo.Collection, doc bson.D) error {
	t.Helper()
	_, err := c.InsertOne(sdCtx(t), doc)
	if err == nil {
		t.Fatalf("insert of %v succeeded", doc)
	}
	return err
}

func TestValidatorQueryOperators(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("val")
	validator := bson.D{
		{Key: "qty", Value: bson.D{{Key: "$gte", Value: 0}}},
		{Key: "sku", Value: bson.D{{Key: "$type", Value: "string"}}},
		{Key: "$expr", Value: bson.D{{Key: "$lte", Value: bson.A{"$qty", "$max"}}}},
	}
	sdNoErr(t, db.CreateCollection(ctx, "stock", options.CreateCollection().SetValidator(validator)))
	stock := db.Collection("stock")
	_, err := stock.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "qty", Value: 5}, {Key: "sku", Value: "a"}, {Key: "max", Value: 10}})
	sdNoErr(t, err)

	_, err = stock.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "qty", Value: -1}, {Key: "sku", Value: 7}, {Key: "max", Value: 10}})
	if cmdErrCode(err) != 121 {
		t.Fatalf("insert: %v", err)
	}
	details := writeErrInfo(t, err).Lookup("details").Document()
	if details.Lookup("operatorName").StringValue() != "$and" {
		t.Fatalf("details = %s", details)
	}
	clauses, _ := details.Lookup("clausesNotSatisfied").Array().Values()
	if len(clauses) != 2 {
		t.Fatalf("clausesNotSatisfied = %v", clauses)
	}
	first := clauses[0].Document()
	if first.Lookup("index").Int32() != 0 || first.Lookup("details", "operatorName").StringValue() != "$gte" ||
		first.Lookup("details", "reason").StringValue() != "comparison failed" {
		t.Fatalf("first clause = %s", first)
	}
	second := clauses[1].Document()
	if second.Lookup("details", "operatorName").StringValue() != "$type" || second.Lookup("details", "consideredType").StringValue() != "int" {
		t.Fatalf("second clause = %s", second)
	}
	_, err = stock.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "qty", Value: 50}, {Key: "sku", Value: "b"}, {Key: "max", Value: 10}})
	if cmdErrCode(err) != 121 {
		t.Fatalf("$expr: %v", err)
	}
	if d := writeErrInfo(t, err).Lookup("details", "clausesNotSatisfied").Array().Index(0).Document(); d.Lookup("details", "operatorName").StringValue() != "$expr" {
		t.Fatalf("$expr details = %s", d)
	}
	// $where and $text are refused in a validator, as mongod does.
	err = db.CreateCollection(ctx, "w", options.CreateCollection().SetValidator(bson.D{{Key: "$where", Value: "true"}}))
	if cmdErrCode(err) == 0 {
		t.Fatalf("$where validator accepted")
	}
}

func TestValidationLevelsActionsAndBypass(t *testing.T) {
	var logs bytes.Buffer
	c := StartWithOptions(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI()).SetHeartbeatInterval(500 * time.Millisecond))
	sdNoErr(t, err)
	t.Cleanup(func() { _ = client.Disconnect(sdCtx(t)) })
	ctx := sdCtx(t)
	db := client.Database("val")
	coll := db.Collection("items")
	// Documents that predate the validator.
	_, err = coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: -5}},
		bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 5}},
	})
	sdNoErr(t, err)
	collMod := func(fields ...bson.E) error {
		return db.RunCommand(ctx, append(bson.D{{Key: "collMod", Value: "items"}}, fields...)).Err()
	}
	positive := bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 0}}}}
	sdNoErr(t, collMod(bson.E{Key: "validator", Value: positive}, bson.E{Key: "validationLevel", Value: "moderate"}))

	setN := func(id, n int) error {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}})
		return err
	}
	// moderate: an invalid document may stay invalid; a valid one may not
	// become invalid.
	sdNoErr(t, setN(1, -6))
	if err := setN(2, -1); cmdErrCode(err) != 121 {
		t.Fatalf("moderate update of a valid document: %v", err)
	}
	// strict: every update is checked.
	sdNoErr(t, collMod(bson.E{Key: "validationLevel", Value: "strict"}))
	if err := setN(1, -7); cmdErrCode(err) != 121 {
		t.Fatalf("strict update of an invalid document: %v", err)
	}
	// off: nothing is checked.
	sdNoErr(t, collMod(bson.E{Key: "validationLevel", Value: "off"}))
	sdNoErr(t, setN(1, -8))
	// warn: the write succeeds and the server logs it.
	sdNoErr(t, collMod(bson.E{Key: "validationLevel", Value: "strict"}, bson.E{Key: "validationAction", Value: "warn"}))
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: -3}})
	sdNoErr(t, err)
	if !strings.Contains(logs.String(), "Document would fail validation") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	sdNoErr(t, collMod(bson.E{Key: "validationAction", Value: "error"}))
	if err := collMod(bson.E{Key: "validationLevel", Value: "sometimes"}); cmdErrCode(err) != 2 {
		t.Fatalf("bad validationLevel: %v", err)
	}

	// bypassDocumentValidation on every write path.
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: -4}})
	if cmdErrCode(err) != 121 {
		t.Fatalf("insert without bypass: %v", err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "n", Value: -4}}, options.InsertOne().SetBypassDocumentValidation(true))
	sdNoErr(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: -2}}}}, options.UpdateOne().SetBypassDocumentValidation(true))
	sdNoErr(t, err)
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: -1}}}}, options.FindOneAndUpdate().SetBypassDocumentValidation(true)).Err()
	sdNoErr(t, err)
	_, err = coll.BulkWrite(ctx, []mongo.WriteModel{mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 5}, {Key: "n", Value: -5}})}, options.BulkWrite().SetBypassDocumentValidation(true))
	sdNoErr(t, err)
	_, err = coll.BulkWrite(ctx, []mongo.WriteModel{mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 6}, {Key: "n", Value: -6}})})
	if cmdErrCode(err) != 121 {
		t.Fatalf("bulkWrite without bypass: %v", err)
	}
	// $merge and $out into a validated collection.
	src := db.Collection("src")
	_, err = src.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "n", Value: -7}})
	sdNoErr(t, err)
	merge := mongo.Pipeline{{{Key: "$merge", Value: bson.D{{Key: "into", Value: "items"}}}}}
	if _, err := src.Aggregate(ctx, merge); cmdErrCode(err) != 121 {
		t.Fatalf("$merge without bypass: %v", err)
	}
	_, err = src.Aggregate(ctx, merge, options.Aggregate().SetBypassDocumentValidation(true))
	sdNoErr(t, err)
	n, err := coll.CountDocuments(ctx, bson.D{})
	sdNoErr(t, err)
	if n != 6 {
		t.Fatalf("%d documents, want 6 (1..5 and 7)", n)
	}
	// $out replaces the collection only if every document passes, unless
	// bypassed; the validator stays.
	out := mongo.Pipeline{{{Key: "$out", Value: "items"}}}
	if _, err := src.Aggregate(ctx, out); cmdErrCode(err) != 121 {
		t.Fatalf("$out without bypass: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 6 {
		t.Fatalf("a failed $out changed the collection: %d documents", n)
	}
	_, err = src.Aggregate(ctx, out, options.Aggregate().SetBypassDocumentValidation(true))
	sdNoErr(t, err)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: -1}}); cmdErrCode(err) != 121 {
		t.Fatalf("validator after $out: %v", err)
	}
}
