package wire

import (
	"encoding/binary"
	"hash/crc32"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// castagnoli is the CRC-32C table used for OP_MSG checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// emptyDocument is appended in place of a missing (nil) required document so
// the encoders never produce a structurally invalid message.
var emptyDocument = []byte{5, 0, 0, 0, 0}

func appendDoc(dst []byte, doc bson.Raw) []byte {
	if len(doc) == 0 {
		return append(dst, emptyDocument...)
	}
	return append(dst, doc...)
}

func appendCString(dst []byte, s string) []byte {
	dst = append(dst, s...)
	return append(dst, 0)
}

// patchLength writes the length of dst[start:] into the int32 at dst[start].
func patchLength(dst []byte, start int) {
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
}

// AppendMsg appends m encoded as an OP_MSG to dst and returns the extended
// slice. The kind-0 section comes first, followed by one kind-1 section per
// document sequence. When m.Flags has ChecksumPresent, the CRC-32C checksum is
// computed and appended. A nil Body is encoded as an empty document. The
// caller must not put NUL bytes in identifiers.
func AppendMsg(dst []byte, requestID, responseTo int32, m *Msg) []byte {
	start := len(dst)
	dst = appendHeader(dst, 0, requestID, responseTo, OpMsg)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m.Flags))
	dst = append(dst, 0)
	dst = appendDoc(dst, m.Body)
	for i := range m.Sequences {
		seq := &m.Sequences[i]
		dst = append(dst, 1)
		secStart := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = appendCString(dst, seq.Identifier)
		for _, d := range seq.Documents {
			dst = appendDoc(dst, d)
		}
		patchLength(dst, secStart)
	}
	if m.Flags&ChecksumPresent != 0 {
		// The length must include the checksum before the checksum is
		// computed, because the header is covered by it.
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start+4))
		sum := crc32.Checksum(dst[start:], castagnoli)
		return binary.LittleEndian.AppendUint32(dst, sum)
	}
	patchLength(dst, start)
	return dst
}

// AppendMsgStart appends what precedes the body of an OP_MSG that has one
// kind-0 section of bodyLen bytes and nothing else (no sequences, no
// checksum): the header, the flags and the section's kind. The caller
// sends the body right after, from wherever it was encoded, instead of
// copying it into the message.
func AppendMsgStart(dst []byte, requestID, responseTo int32, flags MsgFlags, bodyLen int) []byte {
	dst = appendHeader(dst, int32(HeaderLen+4+1+bodyLen), requestID, responseTo, OpMsg)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(flags))
	return append(dst, 0)
}

// AppendQuery appends q encoded as an OP_QUERY to dst. A nil Query document
// is encoded as an empty document; ReturnFieldsSelector is omitted when empty.
func AppendQuery(dst []byte, requestID, responseTo int32, q *Query) []byte {
	start := len(dst)
	dst = appendHeader(dst, 0, requestID, responseTo, OpQuery)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.Flags))
	dst = appendCString(dst, q.FullCollectionName)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.NumberToSkip))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(q.NumberToReturn))
	dst = appendDoc(dst, q.Query)
	if len(q.ReturnFieldsSelector) > 0 {
		dst = append(dst, q.ReturnFieldsSelector...)
	}
	patchLength(dst, start)
	return dst
}

// AppendReply appends r encoded as an OP_REPLY to dst. numberReturned is
// len(r.Documents).
func AppendReply(dst []byte, requestID, responseTo int32, r *Reply) []byte {
	start := len(dst)
	dst = appendHeader(dst, 0, requestID, responseTo, OpReply)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(r.ResponseFlags))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.CursorID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(r.StartingFrom))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Documents)))
	for _, d := range r.Documents {
		dst = appendDoc(dst, d)
	}
	patchLength(dst, start)
	return dst
}
