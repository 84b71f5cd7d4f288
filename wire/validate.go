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
	// ends[i] is the offset of the terminating NUL of the i-th open
	// document. Most documents nest a few levels: the stack starts small
	// and on the stack, and grows on the heap only for deep nesting.
	var small [16]int
	ends := small[:0]

	end, at, reason := openDoc(doc, len(ends), 0, len(doc))
	if reason != "" {
		return at, reason
	}
	ends = append(ends, end)
	if ends[0] != len(doc)-1 {
		return 0, "document length does not match its section"
	}
	pos := 4
	for len(ends) > 0 {
		top := ends[len(ends)-1]
		if pos == top {
			ends = ends[:len(ends)-1]
			pos++
			continue
		}
		elemAt := pos
		t := doc[pos]
		pos++
		// Keys are short: a plain loop beats bytes.IndexByte's setup.
		k := pos
		for k < top && doc[k] != 0 {
			k++
		}
		if k >= top {
			return elemAt, "element key not NUL-terminated"
		}
		pos = k + 1
		fixed := -1
		switch t {
		case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
			fixed = 8
		case 0x10: // int32
			fixed = 4
		case 0x13: // decimal128
			fixed = 16
		case 0x07: // ObjectId
			fixed = 12
		case 0x06, 0x0A, 0x7F, 0xFF: // undefined, null, maxKey, minKey
			fixed = 0
		case 0x08: // bool
			if top-pos < 1 {
				return elemAt, "boolean runs past end of document"
			}
			if doc[pos] > 1 {
				return pos, "boolean value " + strconv.Itoa(int(doc[pos]))
			}
			pos++
		case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
			// The well-formed case inline; bsonString says what is wrong.
			if top-pos >= 5 {
				if n := int(int32(binary.LittleEndian.Uint32(doc[pos:]))); n >= 1 && n <= top-pos-4 && doc[pos+3+n] == 0 {
					pos += 4 + n
					break
				}
			}
			if pos, reason = bsonString(doc, pos, top); reason != "" {
				return pos, reason
			}
		case 0x03, 0x04: // document, array
			if top-pos >= 5 && len(ends) < MaxDocumentNesting {
				if n := int(int32(binary.LittleEndian.Uint32(doc[pos:]))); n >= 5 && n <= top-pos && doc[pos+n-1] == 0 {
					ends = append(ends, pos+n-1)
					pos += 4
					break
				}
			}
			end, at, reason := openDoc(doc, len(ends), pos, top)
			if reason != "" {
				return at, reason
			}
			ends = append(ends, end)
			pos += 4
		case 0x05: // binary
			if top-pos < 5 {
				return elemAt, "binary header runs past end of document"
			}
			n := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
			if n < 0 || n > int64(top-pos-5) {
				return pos, "binary length " + strconv.FormatInt(n, 10) + " out of bounds"
			}
			if doc[pos+4] == 0x02 { // old binary repeats the length inside
				if n < 4 || int64(int32(binary.LittleEndian.Uint32(doc[pos+5:]))) != n-4 {
					return pos, "old-style binary with inconsistent length"
				}
			}
			pos += 5 + int(n)
		case 0x0B: // regex: pattern and options cstrings
			for range 2 {
				k := bytes.IndexByte(doc[pos:top], 0)
				if k < 0 {
					return elemAt, "regular expression not NUL-terminated"
				}
				pos += k + 1
			}
		case 0x0C: // DBPointer
			if pos, reason = bsonString(doc, pos, top); reason != "" {
				return pos, reason
			}
			fixed = 12
		case 0x0F: // code with scope: int32 total, string, document
			if top-pos < 4 {
				return elemAt, "code with scope runs past end of document"
			}
			total := int64(int32(binary.LittleEndian.Uint32(doc[pos:])))
			if total < 14 || total > int64(top-pos) {
				return pos, "code with scope length " + strconv.FormatInt(total, 10) + " out of bounds"
			}
			limit := pos + int(total)
			scope, r := bsonString(doc, pos+4, limit)
			if r != "" {
				return scope, r
			}
			end, at, reason := openDoc(doc, len(ends), scope, limit)
			if reason != "" {
				return at, reason
			}
			ends = append(ends, end)
			if ends[len(ends)-1] != limit-1 {
				return pos, "code with scope length does not match its contents"
			}
			pos = scope + 4
		default:
			return elemAt, "unknown element type 0x" + strconv.FormatUint(uint64(t), 16)
		}
		if fixed >= 0 {
			if top-pos < fixed {
				return elemAt, "element value runs past end of document"
			}
			pos += fixed
		}
	}
	if pos != len(doc) {
		return pos, "trailing bytes after document"
	}
	return 0, ""
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
