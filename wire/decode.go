package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Decode parses one whole message; b must hold exactly the declared
// messageLength bytes (as returned by ReadMessage). maxSize of 0 means
// DefaultMaxMessageSize; it bounds both the message and, for OP_COMPRESSED,
// the declared uncompressed size, and is enforced before any allocation or
// decompression.
//
// Documents in the result alias b (or the decompression buffer): they are
// valid only as long as b is not modified.
func Decode(b []byte, maxSize int32) (Message, error) {
	return DecodeInto(b, maxSize, nil)
}

// DecodeInto is Decode, but an OP_MSG is decoded into msg, which the
// result's Msg then points to: a reader that decodes one message after
// another into the same Msg allocates nothing for it. A nil msg is
// allocated, as Decode does.
func DecodeInto(b []byte, maxSize int32, msg *Msg) (Message, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	h, err := ParseHeader(b)
	if err != nil {
		return Message{Header: h}, err
	}
	if h.MessageLength > maxSize {
		return Message{Header: h}, &Error{OpCode: h.OpCode, Reason: "message length " + strconv.Itoa(int(h.MessageLength)) + " exceeds maximum " + strconv.Itoa(int(maxSize)), Err: ErrMessageTooLarge}
	}
	if int(h.MessageLength) != len(b) {
		return Message{Header: h}, &Error{OpCode: h.OpCode, Offset: min(len(b), int(h.MessageLength)), Reason: "declared length " + strconv.Itoa(int(h.MessageLength)) + " but " + strconv.Itoa(len(b)) + " bytes given", Err: ErrMalformed}
	}
	if h.OpCode != OpCompressed {
		return decodeUncompressed(h, b[:HeaderLen], b[HeaderLen:], CompressorNoop, msg)
	}
	inner, hdr, body, c, err := decompress(b, h, maxSize)
	if err != nil {
		return Message{Header: h, Compressor: c}, err
	}
	return decodeUncompressed(inner, hdr[:], body, c, msg)
}

// decodeUncompressed decodes the body of an OP_MSG, OP_QUERY or OP_REPLY.
// hdr is the message's 16 header bytes, needed for the OP_MSG checksum. An
// OP_MSG is decoded into msg (nil: a new one).
func decodeUncompressed(h Header, hdr, body []byte, c Compressor, msg *Msg) (Message, error) {
	m := Message{Header: h, Compressor: c}
	var err error
	switch h.OpCode {
	case OpMsg:
		m.Msg, err = decodeMsg(hdr, body, msg)
	case OpQuery:
		m.Query, err = decodeQuery(body)
	case OpReply:
		m.Reply, err = decodeReply(body)
	default:
		err = &Error{OpCode: h.OpCode, Offset: 12, Reason: "op code " + strconv.Itoa(int(h.OpCode)), Err: ErrUnsupportedOpCode}
	}
	return m, err
}

// reader walks a message body; offsets in errors are relative to the start
// of the message, header included.
type reader struct {
	op  OpCode
	b   []byte
	pos int
}

func (r *reader) fail(at int, reason string) error {
	return &Error{OpCode: r.op, Offset: HeaderLen + at, Reason: reason, Err: ErrMalformed}
}

func (r *reader) int32(field string) (int32, error) {
	if len(r.b)-r.pos < 4 {
		return 0, r.fail(r.pos, field+" runs past end of message")
	}
	v := int32(binary.LittleEndian.Uint32(r.b[r.pos:]))
	r.pos += 4
	return v, nil
}

func (r *reader) int64(field string) (int64, error) {
	if len(r.b)-r.pos < 8 {
		return 0, r.fail(r.pos, field+" runs past end of message")
	}
	v := int64(binary.LittleEndian.Uint64(r.b[r.pos:]))
	r.pos += 8
	return v, nil
}

// cstring reads a NUL-terminated string that must end before limit.
func (r *reader) cstring(field string, limit int) (string, error) {
	i := bytes.IndexByte(r.b[r.pos:limit], 0)
	if i < 0 {
		return "", r.fail(r.pos, field+" is not NUL-terminated")
	}
	s := string(r.b[r.pos : r.pos+i])
	r.pos += i + 1
	return s, nil
}

// identifier reads a kind-1 section's identifier: the ones drivers send
// are shared strings, not an allocation per write command.
func (r *reader) identifier(limit int) (string, error) {
	if i := bytes.IndexByte(r.b[r.pos:limit], 0); i >= 0 {
		if id, ok := knownIdentifier(r.b[r.pos : r.pos+i]); ok {
			r.pos += i + 1
			return id, nil
		}
	}
	return r.cstring("kind-1 section identifier", limit)
}

// knownIdentifier returns the document sequence identifier of insert,
// update, delete or bulkWrite that b spells.
func knownIdentifier(b []byte) (string, bool) {
	switch string(b) {
	case "documents":
		return "documents", true
	case "updates":
		return "updates", true
	case "deletes":
		return "deletes", true
	case "ops":
		return "ops", true
	case "nsInfo":
		return "nsInfo", true
	}
	return "", false
}

// document reads one BSON document that must end at or before limit and
// validates it. The result aliases the input, with its capacity clipped so
// that appending to it cannot overwrite what follows.
func (r *reader) document(field string, limit int) (bson.Raw, error) {
	if limit-r.pos < 4 {
		return nil, r.fail(r.pos, field+": document length runs past end of section")
	}
	n := int64(int32(binary.LittleEndian.Uint32(r.b[r.pos:])))
	if n < 5 {
		return nil, r.fail(r.pos, field+": invalid document length "+strconv.FormatInt(n, 10))
	}
	if n > int64(limit-r.pos) {
		return nil, r.fail(r.pos, field+": document of "+strconv.FormatInt(n, 10)+" bytes runs past end of section")
	}
	end := r.pos + int(n)
	doc := r.b[r.pos:end:end]
	if at, reason := validateBSON(doc); reason != "" {
		err := r.fail(r.pos+at, field+": invalid BSON: "+reason)
		if reason == reasonTooDeep {
			err.(*Error).Err = ErrTooDeep
		}
		return nil, err
	}
	r.pos = end
	return bson.Raw(doc), nil
}

func decodeMsg(hdr, body []byte, m *Msg) (*Msg, error) {
	r := reader{op: OpMsg, b: body}
	flags, err := r.int32("flagBits")
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = new(Msg)
	}
	*m = Msg{Flags: MsgFlags(uint32(flags))}
	if unknown := m.Flags & 0xffff &^ knownRequiredFlags; unknown != 0 {
		return nil, r.fail(0, "unknown required flag bits 0x"+strconv.FormatUint(uint64(unknown), 16))
	}
	end := len(body)
	if m.Flags&ChecksumPresent != 0 {
		if end-r.pos < 4 {
			return nil, r.fail(r.pos, "checksum flag set but message has no room for a checksum")
		}
		end -= 4
		want := binary.LittleEndian.Uint32(body[end:])
		got := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, body[:end])
		if got != want {
			return nil, &Error{OpCode: OpMsg, Offset: HeaderLen + end, Reason: "crc32c is 0x" + strconv.FormatUint(uint64(got), 16) + ", message says 0x" + strconv.FormatUint(uint64(want), 16), Err: ErrChecksum}
		}
	}
	haveBody := false
	for r.pos < end {
		kindAt := r.pos
		kind := body[r.pos]
		r.pos++
		switch kind {
		case 0:
			if haveBody {
				return nil, r.fail(kindAt, "more than one kind-0 section")
			}
			if m.Body, err = r.document("kind-0 section", end); err != nil {
				return nil, err
			}
			haveBody = true
		case 1:
			sizeAt := r.pos
			size, err := r.int32("kind-1 section size")
			if err != nil {
				return nil, err
			}
			// The size covers itself, the identifier and the documents.
			if size < 5 || int64(size) > int64(end-sizeAt) {
				return nil, r.fail(sizeAt, "kind-1 section size "+strconv.Itoa(int(size))+" is invalid or runs past end of message")
			}
			secEnd := sizeAt + int(size)
			id, err := r.identifier(secEnd)
			if err != nil {
				return nil, err
			}
			seq := DocumentSequence{Identifier: id}
			if n := countDocuments(body[r.pos:secEnd]); n > 0 {
				seq.Documents = make([]bson.Raw, 0, n)
			}
			for r.pos < secEnd {
				d, err := r.document("document sequence", secEnd)
				if err != nil {
					var we *Error
					if errors.As(err, &we) {
						we.Reason = strconv.Quote(id) + " " + we.Reason
					}
					return nil, err
				}
				seq.Documents = append(seq.Documents, d)
			}
			m.Sequences = append(m.Sequences, seq)
		default:
			return nil, r.fail(kindAt, "unknown section kind "+strconv.Itoa(int(kind)))
		}
	}
	if !haveBody {
		return nil, r.fail(r.pos, "no kind-0 section")
	}
	return m, nil
}

// countDocuments counts the documents packed in b by their length prefixes,
// so a sequence's slice is allocated once. It stops at the first length that
// does not fit; the decoding pass reports that.
func countDocuments(b []byte) int {
	n := 0
	for len(b) >= 5 {
		l := int32(binary.LittleEndian.Uint32(b))
		if l < 5 || int64(l) > int64(len(b)) {
			break
		}
		b = b[l:]
		n++
	}
	return n
}

func decodeQuery(body []byte) (*Query, error) {
	r := reader{op: OpQuery, b: body}
	q := &Query{}
	var err error
	if q.Flags, err = r.int32("flags"); err != nil {
		return nil, err
	}
	if q.FullCollectionName, err = r.cstring("fullCollectionName", len(body)); err != nil {
		return nil, err
	}
	if q.NumberToSkip, err = r.int32("numberToSkip"); err != nil {
		return nil, err
	}
	if q.NumberToReturn, err = r.int32("numberToReturn"); err != nil {
		return nil, err
	}
	if q.Query, err = r.document("query", len(body)); err != nil {
		return nil, err
	}
	if r.pos < len(body) {
		if q.ReturnFieldsSelector, err = r.document("returnFieldsSelector", len(body)); err != nil {
			return nil, err
		}
	}
	if r.pos != len(body) {
		return nil, r.fail(r.pos, strconv.Itoa(len(body)-r.pos)+" trailing bytes")
	}
	return q, nil
}

func decodeReply(body []byte) (*Reply, error) {
	r := reader{op: OpReply, b: body}
	rp := &Reply{}
	var err error
	if rp.ResponseFlags, err = r.int32("responseFlags"); err != nil {
		return nil, err
	}
	if rp.CursorID, err = r.int64("cursorID"); err != nil {
		return nil, err
	}
	if rp.StartingFrom, err = r.int32("startingFrom"); err != nil {
		return nil, err
	}
	numAt := r.pos
	n, err := r.int32("numberReturned")
	if err != nil {
		return nil, err
	}
	// Each document takes at least 5 bytes, which bounds a lying count.
	if n < 0 || int64(n)*5 > int64(len(body)-r.pos) {
		return nil, r.fail(numAt, "numberReturned "+strconv.Itoa(int(n))+" does not fit in the message")
	}
	if n > 0 {
		rp.Documents = make([]bson.Raw, 0, n)
	}
	for r.pos < len(body) {
		d, err := r.document("reply document", len(body))
		if err != nil {
			return nil, err
		}
		rp.Documents = append(rp.Documents, d)
	}
	if len(rp.Documents) != int(n) {
		return nil, r.fail(numAt, "numberReturned is "+strconv.Itoa(int(n))+" but message holds "+strconv.Itoa(len(rp.Documents))+" documents")
	}
	return rp, nil
}
