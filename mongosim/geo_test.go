package mongosim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func geoPoint(lng, lat float64) bson.D {
	return bson.D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: bson.A{lng, lat}}}
}

func geoPolygon(rings ...[][2]float64) bson.D {
	coords := bson.A{}
	for _, r := range rings {
		ring := bson.A{}
		for _, p := range r {
			ring = append(ring, bson.A{p[0], p[1]})
		}
		coords = append(coords, ring)
	}
	return bson.D{{Key: "type", Value: "Polygon"}, {Key: "coordinates", Value: coords}}
}

// haversine is the great-circle distance in metres on mongod's sphere.
func haversine(lng1, lat1, lng2, lat2 float64) float64 {
	rad := math.Pi / 180
	dLat, dLng := (lat2-lat1)*rad, (lng2-lng1)*rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLng/2)*math.Sin(dLng/2)
	return 2 * 6378100 * math.Asin(math.Sqrt(a))
}

func geoIDs(docs []bson.D) []any {
	out := make([]any, 0, len(docs))
	for _, d := range docs {
		v, _ := geoField(d, "_id")
		out = append(out, v)
	}
	return out
}

func geoField(d bson.D, k string) (any, bool) {
	for _, e := range d {
		if e.Key == k {
			return e.Value, true
		}
	}
	return nil, false
}

func geoWantIDs(t *testing.T, what string, docs []bson.D, want ...any) {
	t.Helper()
	got := geoIDs(docs)
	if len(got) != len(want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("%s: got ids %v, want %v", what, got, want)
		}
	}
}

func geoWantCode(t *testing.T, what string, err error, code int, msgPart string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want code %d", what, code)
	}
	var ce mongo.ServerError
	if !errors.As(err, &ce) || !ce.HasErrorCode(code) {
		t.Fatalf("%s: got %v, want code %d", what, err, code)
	}
	if msgPart != "" && !strings.Contains(err.Error(), msgPart) {
		t.Fatalf("%s: error %q lacks %q", what, err.Error(), msgPart)
	}
}

func geoColl(t *testing.T, name string) (*mongo.Collection, context.Context) {
	client, _ := dataClient(t)
	return client.Database("geo").Collection(name), sdCtx(t)
}

func TestGeo2dsphereIndexValidatesWrites(t *testing.T) {
	coll, ctx := geoColl(t, "places")
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}, {Key: "cat", Value: 1}}})
	sdNoErr(t, err)
	if name != "loc_2dsphere_cat_1" {
		t.Fatalf("index name %q", name)
	}
	specs, err := coll.Indexes().ListSpecifications(ctx)
	sdNoErr(t, err)
	cur, err := coll.Indexes().List(ctx)
	sdNoErr(t, err)
	var raw []bson.D
	sdNoErr(t, cur.All(ctx, &raw))
	if v, _ := geoField(raw[1], "2dsphereIndexVersion"); v != int32(3) || len(specs) != 2 {
		t.Fatalf("listIndexes: %v", raw)
	}

	good := []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(2.35, 48.85)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: bson.A{-0.12, 51.5}}}, // legacy pair
		bson.D{{Key: "_id", Value: 3}},                                           // no geo field: not indexed
		bson.D{{Key: "_id", Value: 4}, {Key: "loc", Value: nil}},
		bson.D{{Key: "_id", Value: 5}, {Key: "loc", Value: geoPolygon([][2]float64{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}}, [][2]float64{{1, 1}, {2, 1}, {2, 2}, {1, 2}, {1, 1}})}},
		bson.D{{Key: "_id", Value: 6}, {Key: "loc", Value: bson.D{{Key: "type", Value: "GeometryCollection"}, {Key: "geometries", Value: bson.A{
			geoPoint(10, 10), bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{10, 10}, bson.A{11, 11}}}}}}}}},
		bson.D{{Key: "_id", Value: 7}, {Key: "loc", Value: bson.D{{Key: "type", Value: "MultiPoint"}, {Key: "coordinates", Value: bson.A{bson.A{0, 90}, bson.A{180, 0}}}}}},
	}
	_, err = coll.InsertMany(ctx, good)
	sdNoErr(t, err)

	bad := []struct {
		doc bson.D
		msg string
	}{
		{bson.D{{Key: "_id", Value: 10}, {Key: "loc", Value: geoPoint(200, 0)}}, "Longitude/latitude is out of bounds, lng: 200 lat: 0"},
		{bson.D{{Key: "_id", Value: 11}, {Key: "loc", Value: bson.A{0, 95}}}, "Longitude/latitude is out of bounds"},
		{bson.D{{Key: "_id", Value: 12}, {Key: "loc", Value: bson.D{{Key: "type", Value: "Point"}}}}, ""},
		{bson.D{{Key: "_id", Value: 13}, {Key: "loc", Value: geoPolygon([][2]float64{{0, 0}, {4, 0}, {4, 4}, {0, 4}})}}, "Loop is not closed"},
		{bson.D{{Key: "_id", Value: 14}, {Key: "loc", Value: geoPolygon([][2]float64{{0, 0}, {4, 4}, {4, 0}, {0, 4}, {0, 0}})}}, "Edges"},
		{bson.D{{Key: "_id", Value: 15}, {Key: "loc", Value: "Paris"}}, `geo element must be an array or object: loc: "Paris"`},
		{bson.D{{Key: "_id", Value: 16}, {Key: "loc", Value: bson.D{{Key: "type", Value: "Triangle"}, {Key: "coordinates", Value: bson.A{}}}}}, "unknown GeoJSON type"},
	}
	for _, b := range bad {
		_, err := coll.InsertOne(ctx, b.doc)
		geoWantCode(t, "insert "+shellString(b.doc), err, 16755, "Can't extract geo keys: { _id: ")
		if b.msg != "" && !strings.Contains(err.Error(), b.msg) {
			t.Fatalf("insert %v: %v lacks %q", b.doc, err, b.msg)
		}
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "loc.coordinates", Value: bson.A{0, -91}}}}})
	geoWantCode(t, "update", err, 16755, "Can't extract geo keys")
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != int64(len(good)) {
		t.Fatalf("%d documents after refused writes", n)
	}

	// Building an index over a bad document fails the same way.
	other := coll.Database().Collection("bad")
	_, err = other.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(0, 100)}})
	sdNoErr(t, err)
	_, err = other.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	geoWantCode(t, "createIndexes", err, 16755, "Index build failed: ")
	if !strings.Contains(err.Error(), "Collection geo.bad ( ") || !strings.Contains(err.Error(), ":: caused by :: Can't extract geo keys: { _id: 1, ") {
		t.Fatalf("createIndexes: %v", err)
	}
}

func TestGeo2dIndex(t *testing.T) {
	coll, ctx := geoColl(t, "flat")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "pos", Value: "2d"}},
		Options: options.Index().SetMin(0).SetMax(100).SetBits(20)})
	sdNoErr(t, err)
	_, err = coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "pos", Value: bson.A{10, 10}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "pos", Value: bson.D{{Key: "x", Value: 13}, {Key: "y", Value: 14}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "pos", Value: bson.A{50, 50}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "pos", Value: bson.A{bson.A{90, 90}, bson.A{11, 10}}}},
	})
	sdNoErr(t, err)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}, {Key: "pos", Value: bson.A{150, 5}}})
	geoWantCode(t, "out of [min, max)", err, 13027, "point not in interval of [ 0, 100 )")

	// Flat $near: plane distance, nearest first, $maxDistance in plane units.
	got := sdFindAll(t, ctx, coll, bson.D{{Key: "pos", Value: bson.D{{Key: "$near", Value: bson.A{10, 10}}, {Key: "$maxDistance", Value: 6}}}})
	geoWantIDs(t, "2d $near", got, 1, 4, 2)
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "pos", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$box", Value: bson.A{bson.A{40, 40}, bson.A{60, 60}}}}}}}})
	geoWantIDs(t, "$box", got, 3)
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "pos", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$center", Value: bson.A{bson.A{10, 10}, 5}}}}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	geoWantIDs(t, "$center", got, 1, 2, 4)
	got = sdFindAll(t, ctx, coll, bson.D{{Key: "pos", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$polygon", Value: bson.A{bson.A{0, 0}, bson.A{25, 0}, bson.A{0, 25}}}}}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	geoWantIDs(t, "$polygon", got, 1, 4) // (13, 14) is beyond the hypotenuse
	st, err := coll.Indexes().List(ctx)
	sdNoErr(t, err)
	var specs []bson.D
	sdNoErr(t, st.All(ctx, &specs))
	if v, _ := geoField(specs[1], "bits"); v != int32(20) {
		t.Fatalf("2d spec %v", specs[1])
	}
}

func TestGeoWithinAndIntersectsWithoutIndex(t *testing.T) {
	coll, ctx := geoColl(t, "noindex")
	square := [][2]float64{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}
	hole := [][2]float64{{4, 4}, {6, 4}, {6, 6}, {4, 6}, {4, 4}}
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(1, 1)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: geoPoint(5, 5)}}, // in the hole
		bson.D{{Key: "_id", Value: 3}, {Key: "loc", Value: geoPoint(20, 20)}},
		bson.D{{Key: "_id", Value: 4}, {Key: "loc", Value: bson.A{2, 8}}}, // legacy
		bson.D{{Key: "_id", Value: 5}, {Key: "loc", Value: bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{-5, 5}, bson.A{2, 5}}}}}},
		bson.D{{Key: "_id", Value: 6}, {Key: "loc", Value: geoPoint(0, 0)}},     // a vertex: within, as mongod
		bson.D{{Key: "_id", Value: 7}, {Key: "loc", Value: geoPoint(0, 90)}},    // north pole
		bson.D{{Key: "_id", Value: 8}, {Key: "loc", Value: geoPoint(179.5, 0)}}, // near the antimeridian
		bson.D{{Key: "_id", Value: 9}, {Key: "loc", Value: geoPoint(-179.5, 0.5)}},
		bson.D{{Key: "_id", Value: 10}, {Key: "loc", Value: "not geo"}},
	})
	sdNoErr(t, err)
	byID := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})
	within := func(g bson.D) bson.D {
		return bson.D{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$geometry", Value: g}}}}}}
	}
	geoWantIDs(t, "polygon with hole", sdFindAll(t, ctx, coll, within(geoPolygon(square, hole)), byID), 1, 4, 6)
	geoWantIDs(t, "polygon without hole", sdFindAll(t, ctx, coll, within(geoPolygon(square)), byID), 1, 2, 4, 6)
	// A polygon across the antimeridian (the smaller region, not the long way round).
	geoWantIDs(t, "antimeridian", sdFindAll(t, ctx, coll, within(geoPolygon([][2]float64{{179, -1}, {-179, -1}, {-179, 1}, {179, 1}, {179, -1}})), byID), 8, 9)
	// A cap around the north pole.
	sphere := bson.D{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$centerSphere", Value: bson.A{bson.A{0, 90}, 0.01}}}}}}}
	geoWantIDs(t, "pole", sdFindAll(t, ctx, coll, sphere, byID), 7)
	empty := within(geoPolygon([][2]float64{{100, 10}, {101, 10}, {101, 11}, {100, 10}}))
	geoWantIDs(t, "empty", sdFindAll(t, ctx, coll, empty, byID))

	inter := func(g bson.D) bson.D {
		return bson.D{{Key: "loc", Value: bson.D{{Key: "$geoIntersects", Value: bson.D{{Key: "$geometry", Value: g}}}}}}
	}
	// The line (-5,5)-(2,5) enters the square; points inside it intersect too.
	geoWantIDs(t, "intersects polygon", sdFindAll(t, ctx, coll, inter(geoPolygon(square, hole)), byID), 1, 4, 5, 6)
	line := bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{-1, 0}, bson.A{-1, 10}}}}
	geoWantIDs(t, "line crosses line", sdFindAll(t, ctx, coll, inter(line), byID), 5)
	n, err := coll.CountDocuments(ctx, within(geoPolygon(square)))
	sdNoErr(t, err)
	if n != 4 {
		t.Fatalf("count $geoWithin: %d", n)
	}

	_, err = coll.Find(ctx, within(geoPoint(1, 1)))
	geoWantCode(t, "$geoWithin a point", err, 2, "$geoWithin not supported with provided geometry")
	_, err = coll.Find(ctx, within(geoPolygon([][2]float64{{0, 0}, {1, 1}, {0, 0}})))
	geoWantCode(t, "degenerate polygon", err, 2, "")
}

func TestGeoNearRequiresIndexAndSortsByDistance(t *testing.T) {
	coll, ctx := geoColl(t, "near")
	docs := []any{}
	// Points along the equator east of (0, 0), and two at the poles.
	for i := 1; i <= 5; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "loc", Value: geoPoint(float64(6-i)*0.01, 0)}})
	}
	docs = append(docs, bson.D{{Key: "_id", Value: 6}, {Key: "loc", Value: geoPoint(0, 90)}},
		bson.D{{Key: "_id", Value: 7}, {Key: "loc", Value: geoPoint(0, -90)}},
		bson.D{{Key: "_id", Value: 8}, {Key: "loc", Value: geoPoint(179.999, 0)}},
		bson.D{{Key: "_id", Value: 9}, {Key: "other", Value: 1}})
	_, err := coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	near := func(lng, lat float64, extra ...bson.E) bson.D {
		n := append(bson.D{{Key: "$geometry", Value: geoPoint(lng, lat)}}, extra...)
		return bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: n}}}}
	}
	_, err = coll.Find(ctx, near(0, 0))
	geoWantCode(t, "no index", err, 291, "unable to find index for $geoNear query")

	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)
	geoWantIDs(t, "$near order", sdFindAll(t, ctx, coll, near(0, 0)), 5, 4, 3, 2, 1, 6, 7, 8)
	// 0.03 degrees of longitude on the equator is 3339.6 m on mongod's sphere.
	max := haversine(0, 0, 0.03, 0) + 1
	geoWantIDs(t, "$maxDistance", sdFindAll(t, ctx, coll, near(0, 0, bson.E{Key: "$maxDistance", Value: max})), 5, 4, 3)
	geoWantIDs(t, "$minDistance", sdFindAll(t, ctx, coll, near(0, 0, bson.E{Key: "$minDistance", Value: max}, bson.E{Key: "$maxDistance", Value: 1e6})), 2, 1)
	geoWantIDs(t, "limit", sdFindAll(t, ctx, coll, near(0, 0), options.Find().SetLimit(2)), 5, 4)
	geoWantIDs(t, "other filter", sdFindAll(t, ctx, coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 3}}}, near(0, 0)[0]}), 5, 4, 6, 7, 8)
	// Across the antimeridian and at the pole.
	geoWantIDs(t, "antimeridian", sdFindAll(t, ctx, coll, near(-179.999, 0), options.Find().SetLimit(1)), 8)
	geoWantIDs(t, "north pole", sdFindAll(t, ctx, coll, near(45, 89.9), options.Find().SetLimit(1)), 6)
	geoWantIDs(t, "empty", sdFindAll(t, ctx, coll, near(90, 0, bson.E{Key: "$maxDistance", Value: 10})))
	// Legacy $nearSphere: radians.
	sph := bson.D{{Key: "loc", Value: bson.D{{Key: "$nearSphere", Value: bson.A{0, 0}}, {Key: "$maxDistance", Value: 0.03 * math.Pi / 180 * 1.0001}}}}
	geoWantIDs(t, "$nearSphere radians", sdFindAll(t, ctx, coll, sph), 5, 4, 3)

	// Not allowed outside find.
	_, err = coll.CountDocuments(ctx, near(0, 0))
	geoWantCode(t, "count", err, 5626500, "not allowed in this context")
	_, err = coll.Find(ctx, bson.D{{Key: "$or", Value: bson.A{near(0, 0), bson.D{{Key: "a", Value: 1}}}}})
	geoWantCode(t, "$or", err, 2, "geoNear must be top-level expr")
	// explain names the geo stage and the index.
	var ex bson.D
	sdNoErr(t, coll.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "near"}, {Key: "filter", Value: near(0, 0)}, {Key: "limit", Value: 2}}},
		{Key: "verbosity", Value: "executionStats"}}).Decode(&ex))
	qp, _ := geoField(ex, "queryPlanner")
	wp, _ := geoField(qp.(bson.D), "winningPlan")
	in, _ := geoField(wp.(bson.D), "inputStage")
	if st, _ := geoField(wp.(bson.D), "stage"); st != "LIMIT" || in == nil {
		t.Fatalf("explain winningPlan %v", wp)
	}
	if st, _ := geoField(in.(bson.D), "stage"); st != "GEO_NEAR_2DSPHERE" {
		t.Fatalf("explain input stage %v", in)
	}
	if name, _ := geoField(in.(bson.D), "indexName"); name != "loc_2dsphere" {
		t.Fatalf("explain index %v", in)
	}
	es, _ := geoField(ex, "executionStats")
	if n, _ := geoField(es.(bson.D), "nReturned"); fmt.Sprint(n) != "2" {
		t.Fatalf("explain nReturned %v", n)
	}
	// A flat legacy $near needs a 2d index.
	_, err = coll.Find(ctx, bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.A{0, 0}}}}})
	geoWantCode(t, "flat $near on 2dsphere", err, 291, "")
}

func TestGeoNearStage(t *testing.T) {
	coll, ctx := geoColl(t, "stage")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(2.3522, 48.8566)}, {Key: "city", Value: "Paris"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: geoPoint(-0.1276, 51.5072)}, {Key: "city", Value: "London"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "loc", Value: geoPoint(13.405, 52.52)}, {Key: "city", Value: "Berlin"}},
		bson.D{{Key: "_id", Value: 4}, {Key: "loc", Value: bson.A{bson.D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: bson.A{4.9041, 52.3676}}}}}, {Key: "city", Value: "Amsterdam"}},
	})
	sdNoErr(t, err)
	stage := func(spec ...bson.E) mongo.Pipeline {
		return mongo.Pipeline{{{Key: "$geoNear", Value: append(bson.D{{Key: "near", Value: geoPoint(2.3522, 48.8566)}, {Key: "distanceField", Value: "dist.m"}}, spec...)}}}
	}
	_, err = coll.Aggregate(ctx, stage())
	geoWantCode(t, "no index", err, 27, "$geoNear requires a 2d or 2dsphere index, but none were found")
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)

	cur, err := coll.Aggregate(ctx, stage(bson.E{Key: "includeLocs", Value: "where"}))
	sdNoErr(t, err)
	var got []bson.D
	sdNoErr(t, cur.All(ctx, &got))
	geoWantIDs(t, "order", got, 1, 2, 4, 3)
	want := map[any]float64{
		int32(1): 0,
		int32(2): haversine(2.3522, 48.8566, -0.1276, 51.5072),
		int32(3): haversine(2.3522, 48.8566, 13.405, 52.52),
		int32(4): haversine(2.3522, 48.8566, 4.9041, 52.3676),
	}
	for _, d := range got {
		id, _ := geoField(d, "_id")
		distDoc, _ := geoField(d, "dist")
		m, _ := geoField(distDoc.(bson.D), "m")
		if math.Abs(m.(float64)-want[id]) > 0.5 { // metres
			t.Fatalf("%v: distance %v, want %v", id, m, want[id])
		}
		if where, _ := geoField(d, "where"); where == nil {
			t.Fatalf("%v: no includeLocs field: %v", id, d)
		}
	}

	// maxDistance (metres), query, distanceMultiplier (to km), later stages.
	cur, err = coll.Aggregate(ctx, append(stage(bson.E{Key: "maxDistance", Value: 400000}, bson.E{Key: "query", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: 1}}}}},
		bson.E{Key: "distanceMultiplier", Value: 0.001}), bson.D{{Key: "$project", Value: bson.D{{Key: "city", Value: 1}, {Key: "dist", Value: 1}}}}))
	sdNoErr(t, err)
	got = nil
	sdNoErr(t, cur.All(ctx, &got))
	geoWantIDs(t, "maxDistance", got, 2)
	distDoc, _ := geoField(got[0], "dist")
	if km, _ := geoField(distDoc.(bson.D), "m"); math.Abs(km.(float64)-want[int32(2)]/1000) > 0.001 {
		t.Fatalf("multiplied distance %v", km)
	}

	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, stage()[0]})
	geoWantCode(t, "not first", err, 40603, "$geoNear was not the first stage in the pipeline.")
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.A{0, 0}}}}}}}})
	geoWantCode(t, "$near in $match", err, 5626500, "")
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "other", Value: "2dsphere"}}})
	sdNoErr(t, err)
	_, err = coll.Aggregate(ctx, stage())
	geoWantCode(t, "two indexes", err, 27, "There is more than one 2dsphere index")
	cur, err = coll.Aggregate(ctx, stage(bson.E{Key: "key", Value: "loc"}, bson.E{Key: "spherical", Value: true}))
	sdNoErr(t, err)
	got = nil
	sdNoErr(t, cur.All(ctx, &got))
	geoWantIDs(t, "key", got, 1, 2, 4, 3)
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$geoNear", Value: bson.D{{Key: "near", Value: geoPoint(0, 0)}}}}})
	geoWantCode(t, "no distanceField", err, 16606, "")
	// A view's own pipeline comes first, so $geoNear is not.
	sdNoErr(t, coll.Database().CreateView(ctx, "stage_view", "stage", mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}}))
	_, err = coll.Database().Collection("stage_view").Aggregate(ctx, stage())
	geoWantCode(t, "on a view", err, 40603, "")
}

// Through routers: an unsharded collection's $near and $geoNear run on its
// shard; a sharded collection spanning several shards refuses them (238)
// rather than merging out of distance order.
func TestGeoThroughRouters(t *testing.T) {
	client, _ := routedClient(t, Options{Shards: 2, Routers: 1}, nil)
	ctx := sdCtx(t)
	coll := client.Database("geo").Collection("routed")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(1, 0)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: geoPoint(0.5, 0)}},
	})
	sdNoErr(t, err)
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)
	near := bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.D{{Key: "$geometry", Value: geoPoint(0, 0)}}}}}}
	geoWantIDs(t, "routed $near", sdFindAll(t, ctx, coll, near), 2, 1)

	shardCollection(t, ctx, client, "geo.spread", bson.D{{Key: "_id", Value: "hashed"}})
	spread := client.Database("geo").Collection("spread")
	_, err = spread.Find(ctx, near)
	geoWantCode(t, "sharded $near", err, 238, "")
	_, err = spread.Aggregate(ctx, mongo.Pipeline{{{Key: "$geoNear", Value: bson.D{{Key: "near", Value: geoPoint(0, 0)}, {Key: "distanceField", Value: "d"}}}}})
	geoWantCode(t, "sharded $geoNear", err, 238, "")
}

// Updates, deletes and findAndModify accept $near, as mongod: the nearest
// matching documents are the ones written.
func TestGeoNearInWrites(t *testing.T) {
	coll, ctx := geoColl(t, "writes")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "loc", Value: geoPoint(3, 0)}},
		bson.D{{Key: "_id", Value: 2}, {Key: "loc", Value: geoPoint(1, 0)}},
		bson.D{{Key: "_id", Value: 3}, {Key: "loc", Value: geoPoint(2, 0)}},
		bson.D{{Key: "_id", Value: 4}, {Key: "loc", Value: geoPoint(50, 0)}},
	})
	sdNoErr(t, err)
	near := func(max float64) bson.D {
		return bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.D{{Key: "$geometry", Value: geoPoint(0, 0)}, {Key: "$maxDistance", Value: max}}}}}}
	}
	_, err = coll.UpdateOne(ctx, near(1e7), bson.D{{Key: "$set", Value: bson.D{{Key: "hit", Value: 1}}}})
	geoWantCode(t, "update without index", err, 291, "")
	_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)

	res, err := coll.UpdateOne(ctx, near(1e7), bson.D{{Key: "$set", Value: bson.D{{Key: "first", Value: true}}}})
	sdNoErr(t, err)
	if res.ModifiedCount != 1 {
		t.Fatalf("updateOne: %+v", res)
	}
	geoWantIDs(t, "updateOne took the nearest", sdFindAll(t, ctx, coll, bson.D{{Key: "first", Value: true}}), 2)
	res, err = coll.UpdateMany(ctx, near(400000), bson.D{{Key: "$set", Value: bson.D{{Key: "close", Value: true}}}})
	sdNoErr(t, err)
	if res.ModifiedCount != 3 {
		t.Fatalf("updateMany within 400 km: %+v", res)
	}
	var got bson.D
	sdNoErr(t, coll.FindOneAndUpdate(ctx, near(1e7), bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}).Decode(&got))
	if id, _ := geoField(got, "_id"); fmt.Sprint(id) != "2" {
		t.Fatalf("findOneAndUpdate: %v", got)
	}
	del, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: 2}}}, near(1e7)[0]})
	sdNoErr(t, err)
	if del.DeletedCount != 1 {
		t.Fatalf("deleteOne: %+v", del)
	}
	geoWantIDs(t, "deleteOne took the nearest but 2", sdFindAll(t, ctx, coll, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})), 1, 2, 4)
}

// The cell index follows writes: moved, deleted and new documents are
// found where they are now.
func TestGeoNearFollowsWrites(t *testing.T) {
	coll, ctx := geoColl(t, "moving")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)
	var docs []any
	for i := 0; i < 200; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "loc", Value: geoPoint(float64(i%20)*5, float64(i/20)*5)}})
	}
	_, err = coll.InsertMany(ctx, docs)
	sdNoErr(t, err)
	near := bson.D{{Key: "loc", Value: bson.D{{Key: "$near", Value: bson.D{{Key: "$geometry", Value: geoPoint(-120, -60)}}}}}}
	first := options.Find().SetLimit(1)
	geoWantIDs(t, "before", sdFindAll(t, ctx, coll, near, first), 0)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 150}}, bson.D{{Key: "$set", Value: bson.D{{Key: "loc", Value: geoPoint(-120, -60.5)}}}})
	sdNoErr(t, err)
	geoWantIDs(t, "moved", sdFindAll(t, ctx, coll, near, first), 150)
	_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 150}})
	sdNoErr(t, err)
	geoWantIDs(t, "deleted", sdFindAll(t, ctx, coll, near, first), 0)
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}, {Key: "loc", Value: geoPoint(-120, -60)}})
	sdNoErr(t, err)
	geoWantIDs(t, "inserted", sdFindAll(t, ctx, coll, near, options.Find().SetLimit(2)), "new", 0)
	if n := len(sdFindAll(t, ctx, coll, near)); n != 200 {
		t.Fatalf("%d documents by distance, want 200", n)
	}
}

// With a 2dsphere index, $geoWithin and $geoIntersects read only the
// documents whose cells meet the query's covering; the answers must be
// those of the unindexed scan, edges, poles and the antimeridian included.
func TestGeoWithinIndexedMatchesScan(t *testing.T) {
	client, _ := dataClient(t)
	ctx := sdCtx(t)
	db := client.Database("geo")
	indexed, plain := db.Collection("within_ix"), db.Collection("within_scan")
	rng := rand.New(rand.NewSource(5))
	docs := []any{
		bson.D{{Key: "_id", Value: "vertex"}, {Key: "loc", Value: geoPoint(0, 0)}},
		bson.D{{Key: "_id", Value: "edge"}, {Key: "loc", Value: geoPoint(5, 0)}},
		bson.D{{Key: "_id", Value: "pole"}, {Key: "loc", Value: geoPoint(0, 90)}},
		bson.D{{Key: "_id", Value: "east"}, {Key: "loc", Value: geoPoint(180, 0)}},
		bson.D{{Key: "_id", Value: "line"}, {Key: "loc", Value: bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{-5, 5}, bson.A{2, 5}}}}}},
		bson.D{{Key: "_id", Value: "poly"}, {Key: "loc", Value: geoPolygon([][2]float64{{1, 1}, {2, 1}, {2, 2}, {1, 1}})}},
		bson.D{{Key: "_id", Value: "legacy"}, {Key: "loc", Value: bson.A{3, 3}}},
	}
	for i := 0; i < 2000; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "loc", Value: geoPoint(rng.Float64()*360-180, rng.Float64()*180-90)}})
	}
	for _, c := range []*mongo.Collection{indexed, plain} {
		_, err := c.InsertMany(ctx, docs)
		sdNoErr(t, err)
	}
	_, err := indexed.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "loc", Value: "2dsphere"}}})
	sdNoErr(t, err)
	square := [][2]float64{{0, 0}, {10, 0}, {10, 10}, {0, 10}, {0, 0}}
	geometry := func(op string, g bson.D) bson.D {
		return bson.D{{Key: "loc", Value: bson.D{{Key: op, Value: bson.D{{Key: "$geometry", Value: g}}}}}}
	}
	queries := []bson.D{
		geometry("$geoWithin", geoPolygon(square, [][2]float64{{4, 4}, {6, 4}, {6, 6}, {4, 6}, {4, 4}})),
		geometry("$geoWithin", geoPolygon([][2]float64{{170, -20}, {-170, -20}, {-170, 20}, {170, 20}, {170, -20}})),
		geometry("$geoIntersects", geoPolygon(square)),
		geometry("$geoIntersects", bson.D{{Key: "type", Value: "LineString"}, {Key: "coordinates", Value: bson.A{bson.A{-1, 0}, bson.A{-1, 10}}}}),
		geometry("$geoIntersects", geoPoint(0, 90)),
		{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$centerSphere", Value: bson.A{bson.A{0, 90}, 0.3}}}}}}},
		{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$centerSphere", Value: bson.A{bson.A{-100, 10}, 3}}}}}}},
		{{Key: "loc", Value: bson.D{{Key: "$geoWithin", Value: bson.D{{Key: "$box", Value: bson.A{bson.A{0, 0}, bson.A{20, 20}}}}}}}},
	}
	byID := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})
	for _, q := range queries {
		got, want := geoIDs(sdFindAll(t, ctx, indexed, q, byID)), geoIDs(sdFindAll(t, ctx, plain, q, byID))
		if fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 {
			t.Fatalf("%v: indexed %v, scan %v", q, got, want)
		}
	}
}
