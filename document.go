package sturdy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// toDoc marshals a caller's document (bson.D, bson.M, bson.Raw, a tagged
// struct...) to raw BSON. A nil document is the empty document when
// nilIsEmpty (filters), else ErrNilDocument.
func toDoc(v any, nilIsEmpty bool) (bson.Raw, error) {
	switch d := v.(type) {
	case nil:
		if nilIsEmpty {
			return emptyDoc, nil
		}
		return nil, ErrNilDocument
	case bson.Raw:
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("%w: invalid raw document: %v", ErrInvalidArgument, err)
		}
		return d, nil
	case []byte:
		return toDoc(bson.Raw(d), nilIsEmpty)
	}
	b, err := bson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot marshal %T as a document: %v", ErrInvalidArgument, v, err)
	}
	return b, nil
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

// toValue marshals any value a command field can hold (a document, an array,
// a pipeline such as []bson.D) by wrapping it in a document.
func toValue(v any) (bson.RawValue, error) {
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		return bson.RawValue{}, fmt.Errorf("%w: cannot marshal %T: %v", ErrInvalidArgument, v, err)
	}
	return bson.Raw(b).Lookup("v"), nil
}

// firstKey returns the first field name of doc ("" for an empty document).
func firstKey(doc bson.Raw) string {
	elems, err := doc.Elements()
	if err != nil || len(elems) == 0 {
		return ""
	}
	return elems[0].Key()
}

// updateValue validates an update: a non-empty document whose first key is
// a $-operator, or an aggregation pipeline (an array).
func updateValue(v any) (bson.RawValue, error) {
	if v == nil {
		return bson.RawValue{}, ErrNilDocument
	}
	rv, err := toValue(v)
	if err != nil {
		return rv, err
	}
	switch rv.Type {
	case bson.TypeEmbeddedDocument:
		k := firstKey(rv.Document())
		if k == "" {
			return rv, argError("update document must not be empty")
		}
		if !strings.HasPrefix(k, "$") {
			return rv, argError("update document must contain only $-operators (first key is %q); use ReplaceOne to replace a document", k)
		}
	case bson.TypeArray:
	default:
		return rv, argError("update must be a document or a pipeline, not %T", v)
	}
	return rv, nil
}

// replacementDoc validates a replacement: a document without $-operators.
func replacementDoc(v any) (bson.Raw, error) {
	doc, err := toDoc(v, false)
	if err != nil {
		return nil, err
	}
	if k := firstKey(doc); strings.HasPrefix(k, "$") {
		return nil, argError("replacement document must not contain $-operators (first key is %q); use UpdateOne", k)
	}
	return doc, nil
}

// ensureID returns doc with an _id, generating an ObjectID placed first when
// it has none, and the _id's value.
func ensureID(doc bson.Raw) (bson.Raw, any, error) {
	if err := doc.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: invalid document: %v", ErrInvalidArgument, err)
	}
	if v, err := doc.LookupErr("_id"); err == nil {
		var id any
		if err := v.Unmarshal(&id); err != nil {
			return nil, nil, fmt.Errorf("%w: decoding _id: %v", ErrInvalidArgument, err)
		}
		return doc, id, nil
	}
	id := bson.NewObjectID()
	// type byte, "_id\x00", 12 bytes of ObjectID
	out := make([]byte, 4, len(doc)+17)
	out = append(out, byte(bson.TypeObjectID), '_', 'i', 'd', 0)
	out = append(out, id[:]...)
	out = append(out, doc[4:]...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, id, nil
}

// cmdBuilder appends optional fields to a command.
type cmdBuilder bson.D

func (b *cmdBuilder) add(key string, v any) { *b = append(*b, bson.E{Key: key, Value: v}) }
func (b *cmdBuilder) addIf(key string, v any) {
	if v != nil {
		b.add(key, v)
	}
}
func (b *cmdBuilder) addTrue(key string, v bool) {
	if v {
		b.add(key, true)
	}
}
func (b *cmdBuilder) addBoolPtr(key string, v *bool) {
	if v != nil {
		b.add(key, *v)
	}
}
func (b *cmdBuilder) addMaxTime(d time.Duration) {
	if d > 0 {
		b.add("maxTimeMS", d.Milliseconds())
	}
}
func (b *cmdBuilder) addCollation(c *Collation) {
	if c != nil {
		b.add("collation", c)
	}
}

// docOrNil marshals an optional document field; nil stays nil.
func docOrNil(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	return toDoc(v, false)
}

// int64Of reads a numeric field of a reply (int32, int64 or double).
func int64Of(doc bson.Raw, key string) int64 {
	v, err := doc.LookupErr(key)
	if err != nil {
		return 0
	}
	n, _ := v.AsInt64OK()
	return n
}

// cursorBatch reads {cursor: {id, ns, firstBatch|nextBatch}} from a reply.
func cursorBatch(reply bson.Raw) (id int64, ns string, batch []bson.Raw, err error) {
	cv, err := reply.LookupErr("cursor")
	if err != nil {
		return 0, "", nil, fmt.Errorf("sturdy: reply has no cursor: %w", err)
	}
	cur, ok := cv.DocumentOK()
	if !ok {
		return 0, "", nil, errors.New("sturdy: reply's cursor is not a document")
	}
	idv, err := cur.LookupErr("id")
	if err != nil {
		return 0, "", nil, errors.New("sturdy: reply's cursor has no id")
	}
	id, ok = idv.AsInt64OK()
	if !ok {
		return 0, "", nil, errors.New("sturdy: reply's cursor id is not a number")
	}
	if v, err := cur.LookupErr("ns"); err == nil {
		ns, _ = v.StringValueOK()
	}
	bv, err := cur.LookupErr("firstBatch")
	if err != nil {
		bv, err = cur.LookupErr("nextBatch")
	}
	if err != nil {
		return 0, "", nil, errors.New("sturdy: reply's cursor has no batch")
	}
	arr, ok := bv.ArrayOK()
	if !ok {
		return 0, "", nil, errors.New("sturdy: reply's cursor batch is not an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return 0, "", nil, fmt.Errorf("sturdy: reading cursor batch: %w", err)
	}
	batch = make([]bson.Raw, 0, len(vals))
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return 0, "", nil, errors.New("sturdy: cursor batch holds a non-document")
		}
		batch = append(batch, d)
	}
	return id, ns, batch, nil
}

// indexName is the default name of an index: keys and directions joined by
// underscores ("a_1_b_-1").
func indexName(keys bson.Raw) (string, error) {
	elems, err := keys.Elements()
	if err != nil {
		return "", err
	}
	if len(elems) == 0 {
		return "", argError("index keys must not be empty")
	}
	parts := make([]string, 0, 2*len(elems))
	for _, e := range elems {
		v := e.Value()
		var s string
		switch v.Type {
		case bson.TypeString:
			s = v.StringValue()
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
			n, _ := v.AsFloat64OK()
			s = fmt.Sprint(n)
		default:
			s = v.String()
		}
		parts = append(parts, e.Key(), s)
	}
	return strings.Join(parts, "_"), nil
}

// lastOptions returns the options a method was given: none (nil, meaning
// every default) or one struct; when several are passed the last non-nil
// one wins, so callers can write InsertOne(ctx, doc) or pass &Options{...}.
func lastOptions[T any](list []*T) *T {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] != nil {
			return list[i]
		}
	}
	return nil
}
