package wire

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// MaxDocumentNesting is the deepest nesting of embedded documents and arrays
// accepted in a document (the top-level document counts as 1). Anything
// deeper is rejected as malformed: recursive BSON decoders would otherwise
// exhaust the goroutine stack, which is a fatal error rather than a panic,
// on a message built of nothing but nested empty documents.
const MaxDocumentNesting = 200

// reasonTooDeep is validateBSON's reason for a document nested deeper than
// MaxDocumentNesting; the decoder reports it as ErrTooDeep.
var reasonTooDeep = "documents nested deeper than " + strconv.Itoa(MaxDocumentNesting)

// validateBSON checks that doc is exactly one well-formed BSON document,
// recursing into embedded documents, arrays and code-with-scope. It is
// iterative, does not allocate, and returns the offset and reason of the
// first problem ("" when doc is valid). bsoncore.Document.Validate is not
// used because it does not look inside embedded documents.
func validateBSON(doc []byte) (at int, reason string) {
	end, at, reason := openDoc(doc, 0, 0, len(doc))
	if reason != "" {
		return at, reason
	}
	if end != len(doc)-1 {
		return 0, "document length does not match its section"
	}
	return walkElements(doc, end)
}

// Sizes of the values whose size the type alone gives, by element type;
// sizeOther marks the types walkElements leaves to otherValue (variable
// size, or unknown).
const sizeOther = -1

var valueSizes = func() (s [256]int8) {
	for i := range s {
		s[i] = sizeOther
	}
	s[0x01], s[0x09], s[0x11], s[0x12] = 8, 8, 8, 8 // double, datetime, timestamp, int64
	s[0x10], s[0x13], s[0x07] = 4, 16, 12           // int32, decimal128, ObjectId
	s[0x06], s[0x0A], s[0x7F], s[0xFF] = 0, 0, 0, 0 // undefined, null, maxKey, minKey
	return s
}()

// walkElements checks the elements of the document starting at offset 0 of
// doc, whose terminating NUL openDoc found at end, and of every document
// nested in it, in one pass. top is the end of the innermost open document;
// outer holds the ends of the documents around it. Fixed-size values,
// strings and documents, nearly everything a reply holds, are checked
// inline; otherValue checks the rest.
func walkElements(doc []byte, end int) (at int, reason string) {
	// Most documents nest a few levels: the stack starts small and on
	// the stack, and grows on the heap only for deep nesting.
	var small [16]int
	outer := small[:0]
	top, pos := end, 4
	for {
		if pos == top {
			pos++ // past the NUL
			if len(outer) == 0 {
				break
			}
			top, outer = outer[len(outer)-1], outer[:len(outer)-1]
			continue
		}
		elemAt, t := pos, doc[pos]
		// Keys are short: a plain loop beats bytes.IndexByte's setup.
		k := pos + 1
		for k < top && doc[k] != 0 {
			k++
		}
		if k >= top {
			return elemAt, "element key not NUL-terminated"
		}
		pos = k + 1
		if size := int(valueSizes[t]); size != sizeOther {
			if top-pos < size {
				return elemAt, "element value runs past end of document"
			}
			pos += size
			continue
		}
		switch t {
		case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
			if top-pos >= 5 {
				if n := int(int32(binary.LittleEndian.Uint32(doc[pos:]))); n >= 1 && n <= top-pos-4 && doc[pos+3+n] == 0 {
					pos += 4 + n
					continue
				}
			}
			if pos, reason = bsonString(doc, pos, top); reason != "" { // says what is wrong
				return pos, reason
			}
		case 0x03, 0x04: // document, array
			depth := len(outer) + 1
			if top-pos >= 5 && depth < MaxDocumentNesting {
				if n := int(int32(binary.LittleEndian.Uint32(doc[pos:]))); n >= 5 && n <= top-pos && doc[pos+n-1] == 0 {
					outer, top, pos = append(outer, top), pos+n-1, pos+4
					continue
				}
			}
			end, at, reason := openDoc(doc, depth, pos, top) // says what is wrong
			if reason != "" {
				return at, reason
			}
			outer, top, pos = append(outer, top), end, pos+4
		default:
			var scopeEnd int
			if pos, scopeEnd, at, reason = otherValue(doc, t, elemAt, pos, top, len(outer)+1); reason != "" {
				return at, reason
			}
			if scopeEnd > 0 { // code with scope: walk its scope document next
				outer, top = append(outer, top), scopeEnd
			}
		}
	}
	if pos != len(doc) {
		return pos, "trailing bytes after document"
	}
	return 0, ""
}

// otherValue checks the value at pos of an element of type t (at elemAt)
// in a document ending at top, depth documents deep, for the types
// walkElements does not check itself, and returns the offset after it. For
// code with scope it returns the offset of the scope document's first
// element and the end of that document (scopeEnd > 0), for the caller to
// walk.
func otherValue(doc []byte, t byte, elemAt, pos, top, depth int) (next, scopeEnd, at int, reason string) {
	switch t {
	case 0x08: // bool
		if top-pos < 1 {
			return 0, 0, elemAt, "boolean runs past end of document"
		}
		if doc[pos] > 1 {
			return 0, 0, pos, "boolean value " + strconv.Itoa(int(doc[pos]))
		}
		return pos + 1, 0, 0, ""
	case 0x05: // binary
		return binaryValue(doc, elemAt, pos, top)
	case 0x0B: // regex: pattern and options cstrings
		for range 2 {
			k := bytes.IndexByte(doc[pos:top], 0)
			if k < 0 {
				return 0, 0, elemAt, "regular expression not NUL-terminated"
			}
			pos += k + 1
		}
		return pos, 0, 0, ""
	case 0x0C: // DBPointer: string and ObjectId
		if pos, reason = bsonString(doc, pos, top); reason != "" {
			return 0, 0, pos, reason
		}
		if top-pos < 12 {
			return 0, 0, elemAt, "element value runs past end of document"
		}
		return pos + 12, 0, 0, ""
	case 0x0F: // code with scope
		return codeWithScope(doc, elemAt, pos, top, depth)
	}
	return 0, 0, elemAt, "unknown element type 0x" + strconv.FormatUint(uint64(t), 16)
}

// binaryValue checks a binary value (int32 length, subtype, bytes) at pos.
func binaryValue(doc []byte, elemAt, pos, top int) (next, scopeEnd, at int, reason string) {
	if top-pos < 5 {
		return 0, 0, elemAt, "binary header runs past end of document"
	}
	n := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
	if n < 0 || n > int64(top-pos-5) {
		return 0, 0, pos, "binary length " + strconv.FormatInt(n, 10) + " out of bounds"
	}
	if doc[pos+4] == 0x02 { // old binary repeats the length inside
		if n < 4 || int64(int32(binary.LittleEndian.Uint32(doc[pos+5:]))) != n-4 {
			return 0, 0, pos, "old-style binary with inconsistent length"
		}
	}
	return pos + 5 + int(n), 0, 0, ""
}

// codeWithScope checks the frame of a code-with-scope value (int32 total,
// string, document) at pos, whose scope document is depth documents deep,
// and returns where the scope's elements start and its end.
func codeWithScope(doc []byte, elemAt, pos, top, depth int) (next, scopeEnd, at int, reason string) {
	if top-pos < 4 {
		return 0, 0, elemAt, "code with scope runs past end of document"
	}
	total := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
	if total < 14 || total > int64(top-pos) {
		return 0, 0, pos, "code with scope length " + strconv.FormatInt(total, 10) + " out of bounds"
	}
	limit := pos + int(total)
	scope, r := bsonString(doc, pos+4, limit)
	if r != "" {
		return 0, 0, scope, r
	}
	end, at, reason := openDoc(doc, depth, scope, limit)
	if reason != "" {
		return 0, 0, at, reason
	}
	if end != limit-1 {
		return 0, 0, pos, "code with scope length does not match its contents"
	}
	return scope + 4, end, 0, ""
}

// openDoc checks the document starting at pos, which must end at or before
// limit, depth documents being open already, and returns the offset of its
// terminating NUL (or where and why it is malformed).
func openDoc(doc []byte, depth, pos, limit int) (end, at int, reason string) {
	if limit-pos < 5 {
		return 0, pos, "document shorter than 5 bytes"
	}
	n := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
	if n < 5 || n > int64(limit-pos) {
		return 0, pos, "document length " + strconv.FormatInt(n, 10) + " out of bounds"
	}
	end = pos + int(n) - 1
	if doc[end] != 0 {
		return 0, end, "document not NUL-terminated"
	}
	if depth == MaxDocumentNesting {
		return 0, pos, reasonTooDeep
	}
	return end, pos, ""
}

// bsonString checks a BSON string (int32 length including NUL, bytes, NUL)
// at pos that must end by limit, returning the offset after it.
func bsonString(doc []byte, pos, limit int) (int, string) {
	if limit-pos < 4 {
		return pos, "string length runs past end of document"
	}
	n := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
	if n < 1 || n > int64(limit-pos-4) {
		return pos, "string length " + strconv.FormatInt(n, 10) + " out of bounds"
	}
	end := pos + 4 + int(n)
	if doc[end-1] != 0 {
		return end - 1, "string not NUL-terminated"
	}
	return end, ""
}
