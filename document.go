package sturdy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/sturdy-go/sturdy/internal/bsonnum"
	"github.com/sturdy-go/sturdy/internal/rawdoc"
	"github.com/sturdy-go/sturdy/wire"
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
	case bson.D:
		if d != nil {
			return appendD(make([]byte, 0, docSizeHint(len(d))), d)
		}
	}
	b, err := bson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot marshal %T as a document: %v", ErrInvalidArgument, v, err)
	}
	return b, nil
}

// appendDoc appends the document toDoc makes of v to dst and returns the
// extended buffer, for callers that recycle one: a bson.D, the common case,
// is encoded straight into dst, without reflection (the same bytes).
func appendDoc(dst []byte, v any, nilIsEmpty bool) ([]byte, error) {
	if d, ok := v.(bson.D); ok && d != nil {
		return appendD(dst, d)
	}
	doc, err := toDoc(v, nilIsEmpty)
	if err != nil {
		return nil, err
	}
	return append(dst, doc...), nil
}

// appendD appends d encoded as a document to dst.
func appendD(dst []byte, d bson.D) ([]byte, error) {
	b, err := wire.AppendDocument(dst, d)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot marshal %T as a document: %v", ErrInvalidArgument, d, err)
	}
	return b, nil
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

// docSizeHint is a first guess at the encoded size of a document of n
// fields, so that encoding small documents allocates once.
func docSizeHint(n int) int { return 16 + 24*n }

// toValue marshals any value a command field can hold (a document, an array,
// a pipeline such as []bson.D) by wrapping it in a document.
func toValue(v any) (bson.RawValue, error) {
	b, err := wire.AppendDocument(make([]byte, 0, 64), bson.D{{Key: "v", Value: v}})
	if err != nil {
		return bson.RawValue{}, fmt.Errorf("%w: cannot marshal %T: %v", ErrInvalidArgument, v, err)
	}
	return bson.Raw(b).Lookup("v"), nil
}

// firstKey returns the first field name of doc ("" for an empty or
// malformed document).
func firstKey(doc bson.Raw) string { return string(firstKeyBytes(doc)) }

// firstKeyBytes is firstKey without the string: the checks on every update
// and replacement need not allocate. Like bson.Raw.Elements it rejects a
// document whose elements are malformed, so malformed documents keep
// reading as empty.
func firstKeyBytes(doc bson.Raw) []byte {
	if len(doc) < 6 || doc[4] == 0 {
		return nil
	}
	if err := bsoncore.Document(doc).Validate(); err != nil {
		return nil
	}
	for i := 5; i < len(doc); i++ {
		if doc[i] == 0 {
			return doc[5:i]
		}
	}
	return nil
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
		if err := checkUpdateDoc(rv.Document()); err != nil {
			return rv, err
		}
	case bson.TypeArray:
	default:
		return rv, argError("update must be a document or a pipeline, not %T", v)
	}
	return rv, nil
}

// checkUpdateDoc checks that an update document is not empty and starts
// with a $-operator.
func checkUpdateDoc(doc bson.Raw) error {
	k := firstKeyBytes(doc)
	if len(k) == 0 {
		return argError("update document must not be empty")
	}
	if k[0] != '$' {
		return argError("update document must contain only $-operators (first key is %q); use ReplaceOne to replace a document", k)
	}
	return nil
}

// replacementDoc validates a replacement: a document without $-operators.
func replacementDoc(v any) (bson.Raw, error) {
	doc, err := toDoc(v, false)
	if err != nil {
		return nil, err
	}
	if k := firstKeyBytes(doc); len(k) > 0 && k[0] == '$' {
		return nil, argError("replacement document must not contain $-operators (first key is %q); use UpdateOne", k)
	}
	return doc, nil
}

// toDocWithID is toDoc then ensureID: the document to insert and its _id.
// A bson.D without _id, the common case, is encoded once with a new
// ObjectID in front instead of encoded and then copied behind one, into dst
// (appended to; nil: a buffer of its own) for a caller that recycles one.
func toDocWithID(dst []byte, v any) (bson.Raw, any, error) {
	if d, ok := v.(bson.D); ok && d != nil && !slices.ContainsFunc(d, func(e bson.E) bool { return e.Key == "_id" }) {
		if dst == nil {
			dst = make([]byte, 0, idElemLen+docSizeHint(len(d)))
		}
		// The document goes after room for the _id element; its own
		// length prefix is then overwritten by the end of that element.
		start := len(dst)
		b, err := appendD(append(dst, make([]byte, idElemLen)...), d)
		if err != nil {
			return nil, nil, err
		}
		id := bson.NewObjectID()
		binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
		appendIDElem(b[start+4:start+4], id)
		return b[start:], id, nil
	}
	doc, err := toDoc(v, false)
	if err != nil {
		return nil, nil, err
	}
	return ensureID(doc)
}

// idElemLen is the size of an ObjectID _id element: type byte, "_id\x00",
// 12 bytes of ObjectID.
const idElemLen = 1 + 4 + 12

func appendIDElem(dst []byte, id bson.ObjectID) []byte {
	dst = append(dst, byte(bson.TypeObjectID), '_', 'i', 'd', 0)
	return append(dst, id[:]...)
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
	out := appendIDElem(make([]byte, 4, len(doc)+idElemLen), id)
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

// addDoc adds an optional document field (a sort, a projection), marshalled.
func (b *cmdBuilder) addDoc(key string, v any) error {
	d, err := docOrNil(v)
	if err != nil {
		return err
	}
	b.addIf(key, d)
	return nil
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

// int64Of reads a numeric field of a reply (int32, int64 or double); 0
// when absent or not a number.
func int64Of(doc bson.Raw, key string) int64 {
	n, _ := bsonnum.Field(doc, key)
	return n
}

// cursorBatch reads {cursor: {id, ns, firstBatch|nextBatch}} from a reply.
// The batch's documents stay in the reply: they are walked in place rather
// than copied into a slice, which for a large batch saves an allocation per
// document. ns is the namespace's bytes within the reply (nil if absent),
// left for the caller to copy only when the cursor is still open: a
// single-batch find never needs it.
func cursorBatch(reply bson.Raw) (id int64, ns []byte, batch docBatch, err error) {
	cv, err := reply.LookupErr("cursor")
	if err != nil {
		return 0, nil, batch, fmt.Errorf("sturdy: reply has no cursor: %w", err)
	}
	cur, ok := cv.DocumentOK()
	if !ok {
		return 0, nil, batch, errors.New("sturdy: reply's cursor is not a document")
	}
	var f [4]bson.RawValue // id, ns, firstBatch, nextBatch
	rawdoc.FirstFields(cur, cursorKeys[:], f[:])
	if f[0].Type == 0 {
		return 0, nil, batch, errors.New("sturdy: reply's cursor has no id")
	}
	id, ok = f[0].AsInt64OK()
	if !ok {
		return 0, nil, batch, errors.New("sturdy: reply's cursor id is not a number")
	}
	if f[1].Type == bson.TypeString {
		ns = stringBytes(f[1].Value)
	}
	bv := f[2]
	if bv.Type == 0 {
		bv = f[3]
	}
	if bv.Type == 0 {
		return 0, nil, batch, errors.New("sturdy: reply's cursor has no batch")
	}
	arr, ok := bv.ArrayOK()
	if !ok {
		return 0, nil, batch, errors.New("sturdy: reply's cursor batch is not an array")
	}
	if batch, err = newDocBatch(arr); err != nil {
		return 0, nil, batch, err
	}
	return id, ns, batch, nil
}

// cursorKeys are the cursor document's fields cursorBatch reads.
var cursorKeys = [...]string{"id", "ns", "firstBatch", "nextBatch"}

// stringBytes returns a BSON string value's bytes, without the length
// prefix and the NUL; nil if data does not hold a well-formed string.
func stringBytes(data []byte) []byte {
	if len(data) < 5 {
		return nil
	}
	n := int(int32(binary.LittleEndian.Uint32(data)))
	if n < 1 || n > len(data)-4 || data[4+n-1] != 0 {
		return nil
	}
	return data[4 : 4+n-1 : 4+n-1]
}

// docBatch walks the documents of a BSON array in place.
type docBatch struct {
	elems []byte // the array's elements not yet returned
	n     int    // how many documents remain
}

// newDocBatch checks that every element of arr is a document, counts them
// and returns the batch positioned on the first.
func newDocBatch(arr bson.RawArray) (docBatch, error) {
	if len(arr) < 5 {
		return docBatch{}, errors.New("sturdy: reading cursor batch: array too short")
	}
	b := docBatch{elems: arr[4 : len(arr)-1]}
	for rest := b.elems; len(rest) > 0; {
		if rest[0] != byte(bson.TypeEmbeddedDocument) {
			return docBatch{}, errors.New("sturdy: cursor batch holds a non-document")
		}
		_, next, ok := nextDocElem(rest)
		if !ok {
			return docBatch{}, errors.New("sturdy: reading cursor batch: malformed array")
		}
		rest = next
		b.n++
	}
	return b, nil
}

// nextDocElem splits the first element off elems: a document element gives
// the document and ok; anything else (another type, or bytes that do not
// hold a whole element) gives !ok.
func nextDocElem(elems []byte) (doc bson.Raw, rest []byte, ok bool) {
	if len(elems) == 0 || elems[0] != byte(bson.TypeEmbeddedDocument) {
		return nil, elems, false
	}
	k := 1
	for k < len(elems) && elems[k] != 0 {
		k++
	}
	k++ // the key's NUL
	if len(elems)-k < 5 {
		return nil, elems, false
	}
	n := int(int32(binary.LittleEndian.Uint32(elems[k:])))
	if n < 5 || n > len(elems)-k {
		return nil, elems, false
	}
	return bson.Raw(elems[k : k+n : k+n]), elems[k+n:], true
}

// next returns the next document, or false when the batch is exhausted.
func (b *docBatch) next() (bson.Raw, bool) {
	if b.n == 0 {
		return nil, false
	}
	doc, rest, ok := nextDocElem(b.elems)
	if !ok { // checked by newDocBatch: unreachable
		b.n, b.elems = 0, nil
		return nil, false
	}
	b.elems = rest
	b.n--
	return doc, true
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
