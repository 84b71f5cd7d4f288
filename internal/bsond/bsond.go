package bsond

import (
	"bytes"
	"errors"
	"slices"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// errSlowPath: appendD met a value it does not encode itself; the caller
// marshals the whole document with bson.Marshal instead.
var errSlowPath = errors.New("bsond: value needs bson.Marshal")

// Marshal encodes d as bson.Marshal does, without reflection for the
// types replies are made of (documents, arrays, strings, numbers, ...): a
// large find reply spent most of its server CPU in bson.Marshal's codec
// lookups. Anything else falls back to bson.Marshal, so the bytes are
// always the same.
func Marshal(d bson.D) (bson.Raw, error) {
	return AppendMarshal(nil, d)
}

// AppendMarshal appends d encoded as Marshal encodes it to dst: a reply
// goes straight into its message's buffer, after the header. On error dst
// is returned as it was.
func AppendMarshal(dst []byte, d bson.D) ([]byte, error) {
	if d != nil { // nil: bson.Marshal's error, as before
		// Sizing first spares a large reply (a find's 16 MiB batch) the
		// regrowth and copies of its buffer; it also finds what only
		// bson.Marshal encodes.
		if n, ok := sizeD(d); ok {
			if out, err := appendD(slices.Grow(dst, n), d); err == nil {
				return out, nil
			}
		}
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		return dst, err
	}
	if dst == nil {
		return raw, nil
	}
	return append(dst, raw...), nil
}

// sizeD is the encoded size of d, or !ok when appendD would leave it to
// bson.Marshal.
func sizeD(d bson.D) (int, bool) {
	n := 5
	for _, e := range d {
		m, ok := sizeElem(len(e.Key), e.Value)
		if !ok || hasNUL(e.Key) {
			return 0, false
		}
		n += m
	}
	return n, true
}

func sizeElem(keyLen int, v any) (int, bool) {
	n := 2 + keyLen // type byte, key, NUL
	switch v := v.(type) {
	case nil, bool:
		if _, isBool := v.(bool); isBool {
			n++
		}
	case string:
		n += 5 + len(v)
	case int32:
		n += 4
	case int64, float64, bson.DateTime, bson.Timestamp:
		n += 8
	case bson.ObjectID:
		n += 12
	case bson.Binary:
		n += 5 + len(v.Data)
		if v.Subtype == 2 {
			n += 4
		}
	case bson.D:
		if v != nil {
			m, ok := sizeD(v)
			if !ok {
				return 0, false
			}
			n += m
		}
	case bson.Raw:
		if !wellFormed(v) {
			return 0, false
		}
		n += len(v)
	case Doc:
		n += len(v)
	case bson.A:
		if v != nil {
			n += 5
			for i, x := range v {
				m, ok := sizeElem(decimalLen(i), x)
				if !ok {
					return 0, false
				}
				n += m
			}
		}
	default:
		return 0, false
	}
	return n, true
}

// Doc is an encoded document that Marshal copies into its output as it
// is, without the check a bson.Raw gets: for documents the caller encoded
// itself (mongosim sends its stored documents' encodings). bson.Marshal
// encodes it as the embedded document it is.
type Doc []byte

// MarshalBSONValue makes bson.Marshal encode d as an embedded document.
func (d Doc) MarshalBSONValue() (byte, []byte, error) {
	return byte(bson.TypeEmbeddedDocument), d, nil
}

// wellFormed reports whether raw is one whole valid document, which is
// then copied as is (an encoded document inside a reply: mongosim's
// stored documents); bson.Marshal reports, or trims, anything else.
func wellFormed(raw bson.Raw) bool {
	n, _, ok := bsoncore.ReadLength(raw)
	return ok && int(n) == len(raw) && bsoncore.Document(raw).Validate() == nil
}

// hasNUL reports whether key holds a NUL byte, which BSON keys cannot. A
// plain loop: keys are short, and strings.IndexByte's call was 14% of a
// large find reply's server CPU.
func hasNUL(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return true
		}
	}
	return false
}

// decimalLen is the number of digits of i >= 0.
func decimalLen(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}

func appendD(dst []byte, d bson.D) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	var err error
	for _, e := range d {
		at := len(dst)
		dst = append(dst, 0) // the type, set once the value is in
		dst = append(dst, e.Key...)
		dst = append(dst, 0)
		if dst, err = appendValue(dst, at, e.Value); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

// appendA writes each element's key (its index) straight into dst, from a
// decimal counter: a large reply's array of documents spent a tenth of its
// encoding making the keys strings, and 8% converting them to decimal.
func appendA(dst []byte, a []any) ([]byte, error) {
	idx, dst := bsoncore.AppendArrayStart(dst)
	var (
		key indexKey
		err error
	)
	key.reset()
	for _, v := range a {
		at := len(dst)
		dst = append(dst, 0)
		dst = append(dst, key.digits()...)
		dst = append(dst, 0)
		if dst, err = appendValue(dst, at, v); err != nil {
			return nil, err
		}
		key.next()
	}
	return bsoncore.AppendArrayEnd(dst, idx)
}

// indexKey is an array index in decimal, counted up digit by digit.
type indexKey struct {
	buf   [20]byte
	start int // the digits are buf[start:]
}

func (k *indexKey) reset() {
	k.start = len(k.buf) - 1
	k.buf[k.start] = '0'
}

func (k *indexKey) digits() []byte { return k.buf[k.start:] }

func (k *indexKey) next() {
	for i := len(k.buf) - 1; i >= k.start; i-- {
		if k.buf[i] < '9' {
			k.buf[i]++
			return
		}
		k.buf[i] = '0'
	}
	k.start--
	k.buf[k.start] = '1'
}

// appendValue appends v and sets its type at dst[at], or returns
// errSlowPath for a type it leaves to bson.Marshal. Keys holding a NUL and
// malformed bson.Raw documents are sizeD's to refuse.
func appendValue(dst []byte, at int, v any) ([]byte, error) {
	t := bsoncore.TypeNull
	switch v := v.(type) {
	case nil:
	case string:
		t, dst = bsoncore.TypeString, bsoncore.AppendString(dst, v)
	case int32:
		t, dst = bsoncore.TypeInt32, bsoncore.AppendInt32(dst, v)
	case int64:
		t, dst = bsoncore.TypeInt64, bsoncore.AppendInt64(dst, v)
	case float64:
		t, dst = bsoncore.TypeDouble, bsoncore.AppendDouble(dst, v)
	case bool:
		t, dst = bsoncore.TypeBoolean, bsoncore.AppendBoolean(dst, v)
	case bson.ObjectID:
		t, dst = bsoncore.TypeObjectID, bsoncore.AppendObjectID(dst, v)
	case bson.DateTime:
		t, dst = bsoncore.TypeDateTime, bsoncore.AppendDateTime(dst, int64(v))
	case bson.Timestamp:
		t, dst = bsoncore.TypeTimestamp, bsoncore.AppendTimestamp(dst, v.T, v.I)
	case bson.Binary:
		t, dst = bsoncore.TypeBinary, bsoncore.AppendBinary(dst, v.Subtype, v.Data)
	case bson.D:
		if v != nil {
			var err error
			if dst, err = appendD(dst, v); err != nil {
				return nil, err
			}
			t = bsoncore.TypeEmbeddedDocument
		}
	case bson.A:
		if v != nil {
			var err error
			if dst, err = appendA(dst, v); err != nil {
				return nil, err
			}
			t = bsoncore.TypeArray
		}
	case bson.Raw:
		t, dst = bsoncore.TypeEmbeddedDocument, append(dst, v...)
	case Doc:
		t, dst = bsoncore.TypeEmbeddedDocument, append(dst, v...)
	default:
		return nil, errSlowPath
	}
	dst[at] = byte(t)
	return dst, nil
}

// Unmarshal decodes raw as bson.Unmarshal into a bson.D does, without
// reflection for the common types (an insert of 1 000 documents spent a
// fifth of mongosim's CPU in bson.Unmarshal); other types and malformed
// input go to bson.Unmarshal, which decodes or reports them.
func Unmarshal(raw []byte) (bson.D, error) {
	return unmarshal(raw, 0, false)
}

// UnmarshalCommand is Unmarshal for a command's body, with room for that
// many more fields in the document returned (when the fast path decodes
// it): a command's document sequences are added to it as fields without
// copying it once more. Short strings at its top level (the collection's
// and the database's names) come from commandStrings.
func UnmarshalCommand(raw []byte, room int) (bson.D, error) {
	return unmarshal(raw, room, true)
}

func unmarshal(raw []byte, room int, command bool) (bson.D, error) {
	if d, ok := readD(raw, room, nil, command); ok {
		return d, nil
	}
	var d bson.D
	err := bson.Unmarshal(raw, &d)
	return d, err
}

// commandStrings holds the boxed values of short strings seen at
// commands' top level, direct-mapped by a hash of their bytes (a string
// that misses takes its slot): a command's collection and database names
// repeat from one command to the next, and each was two allocations, the
// string and its interface box.
var commandStrings [256]atomic.Value

// maxCommandString bounds the strings commandStrings keeps.
const maxCommandString = 64

// commandString is b as a boxed string, from commandStrings when it is
// there.
func commandString(b []byte) any {
	if len(b) > maxCommandString {
		return string(b)
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &commandStrings[h%uint32(len(commandStrings))]
	if v := slot.Load(); v != nil && v.(string) == string(b) {
		return v
	}
	var v any = string(b)
	slot.Store(v)
	return v
}

// slabs hold the fields of a document's nested documents, the values of
// its arrays and the bytes of its short binaries, so that they take one
// allocation each instead of one per nested document, array or binary: a
// driver's command has four or five nested documents (filter, lsid,
// $clusterTime and its signature) and two binaries (the session's id and
// the signature's hash). Only a document whose nested values are few gets
// slabs: a nested document kept for long (a session's lsid, a stored
// subdocument) keeps its whole slab alive.
type slabs struct {
	fields []bson.E
	values []any
	bytes  []byte
}

// slabLimit bounds the fields and values one slab pair holds (2 KiB of
// fields at most), maxSlabBinary the binaries that take their bytes from
// a slab.
const (
	slabLimit     = 64
	maxSlabBinary = 64
)

// slabCounts is what the slabs for a document's nested values hold.
type slabCounts struct{ fields, values, bytes int }

// size sizes the slabs for the nested documents and arrays among elems
// and the short binaries among them and in them (none when the nested
// values are too many: each takes its own allocation then).
func (s *slabs) size(elems []byte) {
	var n slabCounts
	if _, ok := n.count(elems); !ok {
		return
	}
	s.fields = make([]bson.E, n.fields)
	s.values = make([]any, n.values)
	s.bytes = make([]byte, n.bytes)
}

// count adds the fields of the documents and the values of the arrays
// nested in elems (at any depth) and the bytes of its short binaries, and
// returns how many elements elems holds: one walk, each nested document
// counted as it is walked. ok is false when the nested values pass
// slabLimit or elems is malformed.
func (n *slabCounts) count(elems []byte) (walked int, ok bool) {
	for len(elems) > 0 {
		elem, rest, ok := bsoncore.ReadElement(elems)
		if !ok {
			return 0, false
		}
		elems, walked = rest, walked+1
		if bsoncore.Type(elem[0]) == bsoncore.TypeBinary {
			if _, data, ok := elem.Value().BinaryOK(); ok && len(data) <= maxSlabBinary {
				n.bytes += len(data)
			}
			continue
		}
		if !nests(elem[0]) {
			continue
		}
		inner, ok := docElems(elem.Value().Data)
		if !ok {
			return 0, false
		}
		k, ok := n.count(inner)
		if !ok {
			return 0, false
		}
		if bsoncore.Type(elem[0]) == bsoncore.TypeArray {
			n.values += k
		} else {
			n.fields += k
		}
		if n.fields+n.values > slabLimit {
			return 0, false
		}
	}
	return walked, true
}

func nests(t byte) bool {
	return bsoncore.Type(t) == bsoncore.TypeEmbeddedDocument || bsoncore.Type(t) == bsoncore.TypeArray
}

// copyOut copies src to the front of *slab, cutting the copy's capacity at
// its length so that appending to it never reaches what follows, or to a
// new slice when the slab is too short. An empty src gives an empty,
// non-nil slice, as bson.Unmarshal gives.
func copyOut[T any](slab *[]T, src []T) []T {
	n := len(src)
	var dst []T
	if n > 0 && len(*slab) >= n {
		dst, *slab = (*slab)[:n:n], (*slab)[n:]
	} else {
		dst = make([]T, n)
	}
	copy(dst, src)
	return dst
}

// readD and readA gather the elements in a buffer on the stack and copy
// them into a slice of the exact length (plus room): growing a bson.D from
// empty took three allocations per small document, 15% of an insert of
// 1 000 of them. The outermost document (s == nil) gets its own slice and
// sizes the slabs its nested documents and arrays take theirs from, at its
// first nested value (a flat document walks its elements once). A
// command's top-level strings come from commandStrings.
func readD(raw []byte, room int, s *slabs, command bool) (bson.D, bool) {
	elems, ok := docElems(raw)
	if !ok {
		return nil, false
	}
	outer := s == nil
	var own slabs
	var buf [16]bson.E
	d := buf[:0]
	for len(elems) > 0 {
		if outer && s == nil && nests(elems[0]) {
			s = &own
			s.size(elems)
		}
		var e bson.E
		if e.Key, e.Value, elems, ok = readElem(elems, s, command); !ok {
			return nil, false
		}
		d = append(d, e)
	}
	if outer {
		return append(make(bson.D, 0, len(d)+room), d...), true
	}
	return copyOut(&s.fields, d), true
}

func readA(raw []byte, s *slabs) (bson.A, bool) {
	elems, ok := docElems(raw)
	if !ok {
		return nil, false
	}
	var none slabs
	if s == nil {
		s = &none // an array decoded on its own
	}
	var buf [16]any
	a := buf[:0]
	for len(elems) > 0 {
		var v any
		if _, v, elems, ok = readElem(elems, s, false); !ok {
			return nil, false
		}
		a = append(a, v)
	}
	return copyOut(&s.values, a), true
}

// readElem decodes the first of elems, taking nested documents' fields and
// arrays' values from s, and a short string of a command's top level
// (command) from commandStrings; false if it is malformed or of a type
// readValue leaves out.
//
// The value is what follows the key in the element ReadElement measured
// (elem.Value and elem.KeyBytes found the key's end again, and Value
// measured the value again: a tenth of decoding a command).
func readElem(elems []byte, s *slabs, command bool) (key string, v any, rest []byte, ok bool) {
	elem, rest, ok := bsoncore.ReadElement(elems)
	if !ok {
		return "", nil, nil, false
	}
	k := bytes.IndexByte(elem[1:], 0)
	if k < 0 {
		return "", nil, nil, false // a negative length cut the element short
	}
	t, data := bsoncore.Type(elem[0]), elem[k+2:]
	if command && t == bsoncore.TypeString {
		var str []byte
		if str, ok = stringBytes(data); ok {
			v = commandString(str)
		}
	} else {
		v, ok = readValue(bsoncore.Value{Type: t, Data: data}, s)
	}
	if !ok {
		return "", nil, nil, false
	}
	return keyOf(elem[1 : k+1]), v, rest, true
}

// stringBytes is the text of a string value: its length (counting the
// terminating NUL), the text, the NUL. bsoncore does not check the NUL;
// bson refuses a string without it, and so does this decoder.
func stringBytes(data []byte) ([]byte, bool) {
	n, rest, ok := bsoncore.ReadLength(data)
	if !ok || n < 1 || int(n) > len(rest) || rest[n-1] != 0 {
		return nil, false
	}
	return rest[:n-1], true
}

// Key is key as a string, without an allocation for the field names of
// the commands drivers send (see keyOf): a command's name, for example.
func Key(key []byte) string { return keyOf(key) }

// keyOf is key as a string: a field name of the commands drivers send
// (and their generic arguments) is the shared constant, any other key a
// copy. Each key decoded was an allocation, several per command; finding
// the constant costs a few nanoseconds (a map lookup cost more than the
// allocation it saved).
func keyOf(key []byte) string {
	if len(key) > 0 {
		for _, k := range commonKeys[keySlot(len(key), key[0], key[len(key)-1])] {
			if k == string(key) {
				return k
			}
		}
	}
	return string(key)
}

// keySlot spreads the common keys over commonKeys' slots (at most three
// share one).
func keySlot(n int, first, last byte) byte { return byte(n*7) ^ first ^ last<<3 }

var commonKeys = func() (slots [256][]string) {
	for _, k := range []string{
		// generic arguments
		"$db", "lsid", "id", "txnNumber", "autocommit", "startTransaction", "$clusterTime", "clusterTime",
		"signature", "hash", "keyId", "$readPreference", "mode", "readConcern", "level", "afterClusterTime",
		"writeConcern", "w", "j", "wtimeout", "maxTimeMS", "comment", "collation", "let", "apiVersion",
		// CRUD and cursor commands
		"find", "filter", "sort", "projection", "skip", "limit", "batchSize", "singleBatch", "hint",
		"insert", "documents", "ordered", "bypassDocumentValidation", "update", "updates", "q", "u",
		"upsert", "multi", "arrayFilters", "delete", "deletes", "getMore", "collection", "killCursors",
		"cursors", "aggregate", "pipeline", "cursor", "findAndModify", "query", "new", "remove", "fields",
		"count", "distinct", "key",
		// handshake and monitoring
		"hello", "isMaster", "ismaster", "helloOk", "topologyVersion", "processId", "counter",
		"maxAwaitTimeMS", "client", "driver", "name", "version", "os", "type", "architecture", "platform",
		"application", "compression", "loadBalanced", "endSessions", "ping",
		// document fields and operators
		"_id", "$set", "$inc", "$unset", "$push", "$eq", "$in", "$gt", "$gte", "$lt", "$lte", "$ne",
		"$and", "$or", "$match", "$project", "$group", "$sort", "$limit", "$skip",
	} {
		i := keySlot(len(k), k[0], k[len(k)-1])
		slots[i] = append(slots[i], k)
	}
	return slots
}()

// docElems returns the elements of a whole document: raw without its
// length and terminating NUL.
func docElems(raw []byte) ([]byte, bool) {
	n, _, ok := bsoncore.ReadLength(raw)
	if !ok || n < 5 || int(n) != len(raw) || raw[n-1] != 0 {
		return nil, false
	}
	return raw[4 : n-1], true
}

func readValue(v bsoncore.Value, s *slabs) (any, bool) {
	switch v.Type {
	case bsoncore.TypeDouble:
		return v.DoubleOK()
	case bsoncore.TypeString:
		str, ok := stringBytes(v.Data)
		return string(str), ok
	case bsoncore.TypeEmbeddedDocument:
		return readD(v.Data, 0, s, false)
	case bsoncore.TypeArray:
		return readA(v.Data, s)
	case bsoncore.TypeBinary:
		sub, data, ok := v.BinaryOK()
		if s == nil || len(data) > maxSlabBinary {
			return bson.Binary{Subtype: sub, Data: bytes.Clone(data)}, ok
		}
		return bson.Binary{Subtype: sub, Data: copyOut(&s.bytes, data)}, ok
	case bsoncore.TypeObjectID:
		oid, ok := v.ObjectIDOK()
		return bson.ObjectID(oid), ok
	case bsoncore.TypeBoolean:
		// bsoncore reads any byte but 1 as false; bson refuses all but 0
		// and 1, and so does this decoder.
		b, ok := v.BooleanOK()
		return b, ok && v.Data[0] <= 1
	case bsoncore.TypeDateTime:
		dt, ok := v.DateTimeOK()
		return bson.DateTime(dt), ok
	case bsoncore.TypeNull:
		return nil, true
	case bsoncore.TypeInt32:
		return v.Int32OK()
	case bsoncore.TypeTimestamp:
		t, i, ok := v.TimestampOK()
		return bson.Timestamp{T: t, I: i}, ok
	case bsoncore.TypeInt64:
		return v.Int64OK()
	}
	return nil, false
}
