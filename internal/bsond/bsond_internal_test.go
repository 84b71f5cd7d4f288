package bsond

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// TestMarshalMatchesBSONMarshal: the reflection-free encoder must give
// bson.Marshal's bytes for every value it handles, and fall back for the
// rest.
func TestMarshalMatchesBSONMarshal(t *testing.T) {
	oid := bson.NewObjectID()
	cases := []bson.D{
		nil,
		{},
		{{Key: "a", Value: nil}, {Key: "s", Value: "héllo"}, {Key: "e", Value: ""}},
		{{Key: "i", Value: int32(-7)}, {Key: "l", Value: int64(math.MaxInt64)}, {Key: "f", Value: math.NaN()}, {Key: "g", Value: math.Copysign(0, -1)}},
		{{Key: "t", Value: true}, {Key: "f", Value: false}, {Key: "o", Value: oid}, {Key: "d", Value: bson.DateTime(-5)}},
		{{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "b", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}},
		{{Key: "old", Value: bson.Binary{Subtype: 2, Data: []byte("xyz")}}, {Key: "nb", Value: bson.Binary{}}},
		{{Key: "nd", Value: bson.D(nil)}, {Key: "na", Value: bson.A(nil)}, {Key: "ea", Value: bson.A{}}},
		{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}}, bson.A{"x", int64(2)}}}, {Key: "id", Value: int64(0)}}}},
		// Encoded documents are copied; malformed ones are bson.Marshal's
		// to refuse or trim.
		{{Key: "raw", Value: bson.Raw{5, 0, 0, 0, 0}}, {Key: "arr", Value: bson.A{bson.Raw{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0}}}},
		{{Key: "nilraw", Value: bson.Raw(nil)}},
		{{Key: "doc", Value: Doc{5, 0, 0, 0, 0}}, {Key: "docs", Value: bson.A{Doc{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0}, int32(3)}}},
		// A Doc in a document left to bson.Marshal: its MarshalBSONValue.
		{{Key: "doc", Value: Doc{5, 0, 0, 0, 0}}, {Key: "dec", Value: bson.NewDecimal128(1, 2)}},
		{{Key: "short", Value: bson.Raw{6, 0, 0, 0, 0, 0}}},
		{{Key: "trailing", Value: bson.Raw{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0, 0}}},
		{{Key: "badtype", Value: bson.A{bson.Raw{12, 0, 0, 0, 0x77, 'a', 0, 1, 0, 0, 0, 0}}}},
		// Left to bson.Marshal: other types, nested too.
		{{Key: "n", Value: 5}, {Key: "u", Value: uint32(1)}},
		{{Key: "x", Value: bson.D{{Key: "r", Value: bson.Regex{Pattern: "a", Options: "i"}}}}},
		{{Key: "raw", Value: bson.Raw{5, 0, 0, 0, 0}}, {Key: "m", Value: bson.M{"k": "v"}}},
		{{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "mk", Value: bson.MaxKey{}}},
		{{Key: "any", Value: []any{int32(1)}}, {Key: "ss", Value: []string{"a"}}},
	}
	for i, d := range cases {
		want, wantErr := bson.Marshal(d)
		got, gotErr := Marshal(d)
		if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(want, got) {
			t.Errorf("case %d %v:\n got %x, %v\nwant %x, %v", i, d, got, gotErr, want, wantErr)
		}
		// Appended after a prefix (a message header), fast path or not:
		// the prefix and the same bytes, or the prefix alone on error.
		prefix := []byte("header")
		got, gotErr = AppendMarshal(prefix[:len(prefix):len(prefix)], d)
		if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(got, append(prefix, want...)) {
			t.Errorf("case %d appended %v:\n got %x, %v\nwant %s%x, %v", i, d, got, gotErr, prefix, want, wantErr)
		}
	}
	if _, err := appendD(nil, bson.D{{Key: "n", Value: 5}}); err != errSlowPath {
		t.Errorf("int: %v, want the slow path", err)
	}
	if _, err := Marshal(bson.D{{Key: "a\x00b", Value: int32(1)}}); err == nil {
		t.Error("a key holding NUL encoded without error")
	}
}

// TestUnmarshalMatchesBSONUnmarshal: the reflection-free decoder gives
// bson.Unmarshal's bson.D for every document, handled types or not.
func TestUnmarshalMatchesBSONUnmarshal(t *testing.T) {
	oid := bson.NewObjectID()
	docs := []any{
		bson.D{},
		bson.D{{Key: "a", Value: nil}, {Key: "s", Value: "héllo"}, {Key: "i", Value: int32(-7)}, {Key: "l", Value: int64(9)}},
		bson.D{{Key: "f", Value: 1.5}, {Key: "t", Value: true}, {Key: "o", Value: oid}, {Key: "d", Value: bson.DateTime(-5)}},
		bson.D{{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "b", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}},
		bson.D{{Key: "old", Value: bson.Binary{Subtype: 2, Data: []byte("xyz")}}, {Key: "nb", Value: bson.Binary{}}},
		bson.D{{Key: "ed", Value: bson.D{}}, {Key: "ea", Value: bson.A{}}, {Key: "n", Value: bson.A{bson.D{{Key: "x", Value: bson.A{int32(1), "y"}}}}}},
		bson.D{{Key: "r", Value: bson.Regex{Pattern: "a", Options: "i"}}, {Key: "dec", Value: bson.NewDecimal128(1, 2)}},
		bson.D{{Key: "x", Value: bson.D{{Key: "mk", Value: bson.MaxKey{}}, {Key: "u", Value: bson.Undefined{}}}}},
	}
	// More nested values than one slab pair holds: each takes its own.
	var many bson.A
	for i := range slabLimit {
		many = append(many, bson.D{{Key: "i", Value: int32(i)}})
	}
	docs = append(docs, bson.D{{Key: "s", Value: "x"}, {Key: "many", Value: many},
		{Key: "ed", Value: bson.D{}}, {Key: "ea", Value: bson.A{}}, {Key: "eb", Value: bson.Binary{Data: []byte{}}}})
	for i, doc := range docs {
		raw, err := bson.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var want bson.D
		wantErr := bson.Unmarshal(raw, &want)
		got, gotErr := Unmarshal(raw)
		if (wantErr != nil) != (gotErr != nil) || !reflect.DeepEqual(want, got) {
			t.Errorf("case %d:\n got %#v, %v\nwant %#v, %v", i, got, gotErr, want, wantErr)
		}
	}
	noNUL := []byte{14, 0, 0, 0, 0x02, 'a', 0, 2, 0, 0, 0, 'x', 'y', 0} // a string without its NUL
	for _, bad := range [][]byte{nil, {5, 0, 0, 0}, {6, 0, 0, 0, 0x10, 0}, {11, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0}, noNUL} {
		if _, err := Unmarshal(bad); err == nil {
			t.Errorf("%x decoded without error", bad)
		}
		var d bson.D
		if err := bson.Unmarshal(bad, &d); err == nil {
			t.Errorf("%x: bson.Unmarshal decoded it, so the case proves nothing", bad)
		}
	}
}

// TestNestedDocumentsShareSlabs: a driver's command decodes with its
// nested documents' fields in one slab, and growing one of them does not
// touch the others.
func TestNestedDocumentsShareSlabs(t *testing.T) {
	cmd := bson.D{
		{Key: "find", Value: "coll"},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: int32(700)}}},
		{Key: "limit", Value: int32(1)},
		{Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}},
		{Key: "$clusterTime", Value: bson.D{
			{Key: "clusterTime", Value: bson.Timestamp{T: 5, I: 6}},
			{Key: "signature", Value: bson.D{{Key: "hash", Value: bson.Binary{Data: make([]byte, 20)}}, {Key: "keyId", Value: int64(0)}}},
		}},
		{Key: "$db", Value: "test"},
	}
	raw, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// The command's slice, the fields and bytes slabs, and the values
	// boxed into interfaces: two strings (two each), two binaries, the
	// timestamp, int32(700) and the four nested documents. Without the
	// slabs, one more per nested document and per binary.
	if a := testing.AllocsPerRun(100, func() { _, _ = Unmarshal(raw) }); a > 15 {
		t.Errorf("decoding a find command allocates %v times, want 15", a)
	}
	// As a command, its top-level strings ("coll", "test") are the boxed
	// values of the decodings before.
	if a := testing.AllocsPerRun(100, func() { _, _ = UnmarshalCommand(raw, 0) }); a > 11 {
		t.Errorf("decoding a find command as a command allocates %v times, want 11", a)
	}
	d, err := Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	filter := d[1].Value.(bson.D)
	_ = append(filter, bson.E{Key: "x", Value: int32(1)})
	lsid := d[3].Value.(bson.D)
	id := lsid[0].Value.(bson.Binary)
	_ = append(id.Data, 1)
	if !reflect.DeepEqual(d, cmd) {
		t.Errorf("growing the filter and the session id changed the command:\n got %#v\nwant %#v", d, cmd)
	}
}

// TestCommandStrings: a command's top-level strings are right whichever
// strings shared their slot before, from any number of goroutines.
func TestCommandStrings(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				coll := fmt.Sprintf("coll%d", (i*7+g)%600)
				cmd := bson.D{{Key: "find", Value: coll}, {Key: "$db", Value: strings.Repeat("d", i%(maxCommandString+3))}}
				raw, err := bson.Marshal(cmd)
				if err != nil {
					t.Error(err)
					return
				}
				d, err := UnmarshalCommand(raw, 0)
				if err != nil || !reflect.DeepEqual(d, cmd) {
					t.Errorf("got %#v, %v; want %#v", d, err, cmd)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzUnmarshalCommandMatchesBSON: any input decodes as bson.Unmarshal
// decodes it, or fails where it fails.
func FuzzUnmarshalCommandMatchesBSON(f *testing.F) {
	for _, d := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(7)}}}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "$db", Value: "test"}},
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: bson.A{1.5, "s", bson.Binary{Subtype: 2, Data: []byte("xy")}}}}}}},
		{{Key: "r", Value: bson.Regex{Pattern: "a"}}, {Key: "x", Value: bson.D{}}, {Key: "s", Value: ""}},
	} {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want bson.D
		wantErr := bson.Unmarshal(raw, &want)
		got, err := UnmarshalCommand(raw, 1)
		// Printed, not DeepEqual: a NaN is not equal to itself.
		if (err != nil) != (wantErr != nil) || err == nil && fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
			t.Fatalf("%x: got %#v, %v; want %#v, %v", raw, got, err, want, wantErr)
		}
	})
}

// TestSizeDIsExact: the size pass must predict appendD's length exactly,
// or every reply would pay a regrowth.
func TestSizeDIsExact(t *testing.T) {
	big := make(bson.A, 1234)
	for i := range big {
		big[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "b", Value: bson.Binary{Subtype: 2, Data: []byte("ab")}}, {Key: "t", Value: i%2 == 0}}
	}
	d := bson.D{{Key: "a", Value: big}, {Key: "n", Value: nil}, {Key: "r", Value: bson.Raw{5, 0, 0, 0, 0}}, {Key: "e", Value: Doc{5, 0, 0, 0, 0}}, {Key: "na", Value: bson.A(nil)}, {Key: "s", Value: "xyz"},
		{Key: "ts", Value: bson.Timestamp{T: 1}}, {Key: "o", Value: bson.NewObjectID()}, {Key: "f", Value: 2.5}}
	n, ok := sizeD(d)
	out, err := appendD(nil, d)
	if !ok || err != nil || n != len(out) {
		t.Fatalf("sizeD = %d, %v; appendD gave %d bytes, %v", n, ok, len(out), err)
	}
}

// TestIndexKeyCounts: the counter spells every index as strconv does,
// across each carry.
func TestIndexKeyCounts(t *testing.T) {
	var k indexKey
	k.reset()
	for i := 0; i <= 100001; i++ {
		if got, want := string(k.digits()), strconv.Itoa(i); got != want {
			t.Fatalf("index %d spelled %q", i, got)
		}
		k.next()
	}
}

// TestKeyOf: a common key decodes to its shared constant, any other key to
// an equal copy; no slot of the table holds more than three keys.
func TestKeyOf(t *testing.T) {
	n := 0
	for _, slot := range commonKeys {
		if len(slot) > 3 {
			t.Errorf("slot holds %d keys: %q", len(slot), slot)
		}
		for _, k := range slot {
			n++
			got := keyOf([]byte(k))
			if got != k || unsafe.StringData(got) != unsafe.StringData(k) {
				t.Errorf("keyOf(%q) = %q, not the constant", k, got)
			}
		}
	}
	if n < 100 {
		t.Errorf("table holds %d keys", n)
	}
	for _, k := range []string{"", "x", "finds", "$DB", "fInd", "_idx", "a.b"} {
		if got := keyOf([]byte(k)); got != k {
			t.Errorf("keyOf(%q) = %q", k, got)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = keyOf([]byte("singleBatch")) }); a != 0 {
		t.Errorf("keyOf allocates %v times for a common key", a)
	}
}

// FuzzReadElemMatchesElementValue: readElem decodes any input as it did
// with bsoncore.Element's Value and KeyBytes (elemByValue), which found
// the key's end and measured the value again.
func FuzzReadElemMatchesElementValue(f *testing.F) {
	for _, d := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: int32(7)}}}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}},
		{{Key: "a", Value: bson.A{1.5, "s", true, nil, int64(2), bson.Timestamp{T: 1}, bson.NewObjectID(), bson.DateTime(3)}}},
		{{Key: "r", Value: bson.Regex{Pattern: "a"}}, {Key: "x", Value: bson.D{}}},
	} {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw[4 : len(raw)-1])
	}
	f.Fuzz(func(t *testing.T, elems []byte) {
		for len(elems) > 0 {
			key, v, rest, ok := readElem(elems, nil, false)
			wkey, wv, wrest, wok := elemByValue(elems)
			// Printed, not DeepEqual: a NaN is not equal to itself.
			if ok != wok || key != wkey || fmt.Sprintf("%#v", v) != fmt.Sprintf("%#v", wv) || !bytes.Equal(rest, wrest) {
				t.Fatalf("%x: got %q %#v %v, want %q %#v %v", elems, key, v, ok, wkey, wv, wok)
			}
			if !ok {
				return
			}
			elems = rest
		}
	})
}

// elemByValue is readElem as it was: the value and key through
// bsoncore.Element.
func elemByValue(elems []byte) (key string, v any, rest []byte, ok bool) {
	elem, rest, ok := bsoncore.ReadElement(elems)
	if !ok {
		return "", nil, nil, false
	}
	if v, ok = readValue(elem.Value(), nil); !ok {
		return "", nil, nil, false
	}
	return keyOf(elem.KeyBytes()), v, rest, true
}
