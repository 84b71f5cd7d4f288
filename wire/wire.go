package wire

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// OpCode identifies the kind of a wire-protocol message.
type OpCode int32

// Op codes understood by this package.
const (
	OpReply      OpCode = 1
	OpQuery      OpCode = 2004
	OpCompressed OpCode = 2012
	OpMsg        OpCode = 2013
)

// Legacy op codes MongoDB 5.1+ no longer serves. This package does not
// decode them; a server recognises them by the header to answer as mongod
// does.
const (
	OpUpdate      OpCode = 2001
	OpInsert      OpCode = 2002
	OpGetMore     OpCode = 2005
	OpDelete      OpCode = 2006
	OpKillCursors OpCode = 2007
)

// OP_REPLY responseFlags bits.
const (
	ReplyCursorNotFound int32 = 1 << 0
	ReplyQueryFailure   int32 = 1 << 1
)

// String returns the protocol name of the op code, e.g. "OP_MSG".
func (c OpCode) String() string {
	switch c {
	case OpReply:
		return "OP_REPLY"
	case OpQuery:
		return "OP_QUERY"
	case OpCompressed:
		return "OP_COMPRESSED"
	case OpMsg:
		return "OP_MSG"
	case OpUpdate:
		return "OP_UPDATE"
	case OpInsert:
		return "OP_INSERT"
	case OpGetMore:
		return "OP_GET_MORE"
	case OpDelete:
		return "OP_DELETE"
	case OpKillCursors:
		return "OP_KILL_CURSORS"
	}
	return "opcode(" + strconv.Itoa(int(c)) + ")"
}

// HeaderLen is the length of the standard message header.
const HeaderLen = 16

// DefaultMaxMessageSize is the server's default maxMessageSizeBytes. It is
// the limit used when a maxSize argument is 0 (or negative).
const DefaultMaxMessageSize = 48_000_000

// Header is the standard message header that starts every message.
type Header struct {
	MessageLength int32 // total length including the header itself
	RequestID     int32
	ResponseTo    int32
	OpCode        OpCode
}

// ParseHeader parses the 16-byte header at the start of b. It fails with
// ErrMalformed if b is shorter than a header or the declared length is
// smaller than a header; the size limit is left to ReadMessage and Decode.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, &Error{Offset: len(b), Reason: "short header: " + strconv.Itoa(len(b)) + " bytes", Err: ErrMalformed}
	}
	h := Header{
		MessageLength: int32(binary.LittleEndian.Uint32(b[0:])),
		RequestID:     int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo:    int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:        OpCode(binary.LittleEndian.Uint32(b[12:])),
	}
	if h.MessageLength < HeaderLen {
		return h, &Error{OpCode: h.OpCode, Offset: 0, Reason: "declared message length " + strconv.Itoa(int(h.MessageLength)) + " is smaller than the header", Err: ErrMalformed}
	}
	return h, nil
}

// appendHeader appends a header; the length is patched later by patchLength.
func appendHeader(dst []byte, length, requestID, responseTo int32, op OpCode) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(length))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	return binary.LittleEndian.AppendUint32(dst, uint32(op))
}

// MsgFlags are the OP_MSG flagBits.
type MsgFlags uint32

// OP_MSG flag bits. The low 16 bits are "required": a receiver must reject
// bits it does not know. The high 16 bits are optional and ignored if unknown.
const (
	ChecksumPresent MsgFlags = 1 << 0
	MoreToCome      MsgFlags = 1 << 1
	ExhaustAllowed  MsgFlags = 1 << 16
)

// knownRequiredFlags are the required (low 16) bits this package understands.
const knownRequiredFlags = ChecksumPresent | MoreToCome

// DocumentSequence is an OP_MSG kind-1 section: a named list of documents
// that stands in for an array field of the body (e.g. "documents" of insert).
type DocumentSequence struct {
	Identifier string
	Documents  []bson.Raw
}

// Msg is an OP_MSG message.
type Msg struct {
	Flags     MsgFlags
	Body      bson.Raw // the kind-0 section
	Sequences []DocumentSequence
}

// Query is a legacy OP_QUERY message (used only for the initial handshake).
type Query struct {
	Flags                int32
	FullCollectionName   string
	NumberToSkip         int32
	NumberToReturn       int32
	Query                bson.Raw
	ReturnFieldsSelector bson.Raw // optional; nil when absent
}

// Reply is a legacy OP_REPLY message.
type Reply struct {
	ResponseFlags int32
	CursorID      int64
	StartingFrom  int32
	Documents     []bson.Raw
}

// Compressor identifies an OP_COMPRESSED compressor.
type Compressor uint8

// Compressor ids as assigned by the compression specification.
const (
	CompressorNoop   Compressor = 0
	CompressorSnappy Compressor = 1
	CompressorZlib   Compressor = 2
	CompressorZstd   Compressor = 3
)

// CompressorByName maps a compressor name as used in connection strings and
// the handshake ("noop", "snappy", "zlib", "zstd") to its id.
func CompressorByName(name string) (Compressor, bool) {
	switch strings.ToLower(name) {
	case "noop":
		return CompressorNoop, true
	case "snappy":
		return CompressorSnappy, true
	case "zlib":
		return CompressorZlib, true
	case "zstd":
		return CompressorZstd, true
	}
	return 0, false
}

// String returns the compressor's name as used in the handshake.
func (c Compressor) String() string {
	switch c {
	case CompressorNoop:
		return "noop"
	case CompressorSnappy:
		return "snappy"
	case CompressorZlib:
		return "zlib"
	case CompressorZstd:
		return "zstd"
	}
	return "compressor(" + strconv.Itoa(int(c)) + ")"
}

// Message is one decoded message. Exactly one of Msg, Query and Reply is set.
//
// For a message that arrived as OP_COMPRESSED, Header describes the original
// (uncompressed) message: its OpCode is the original op code and its
// MessageLength is the uncompressed length including the header, while
// RequestID and ResponseTo are those of the wire message.
type Message struct {
	Header     Header
	Compressor Compressor // the compressor it arrived with; CompressorNoop if not OP_COMPRESSED
	Msg        *Msg
	Query      *Query
	Reply      *Reply
}

// Sentinel errors. Decoding errors are returned as *Error wrapping one of
// these, so errors.Is(err, ErrMalformed) and friends work.
var (
	ErrMessageTooLarge       = errors.New("message exceeds maximum size")
	ErrMalformed             = errors.New("malformed message")
	ErrChecksum              = errors.New("checksum mismatch")
	ErrUnsupportedOpCode     = errors.New("unsupported op code")
	ErrUnsupportedCompressor = errors.New("unsupported compressor")
	// ErrTooDeep: a document nests deeper than MaxDocumentNesting. It is
	// also ErrMalformed; a server can still answer the request with an
	// error, as mongod does, since the message framing is intact.
	ErrTooDeep error = tooDeepError{}
)

type tooDeepError struct{}

func (tooDeepError) Error() string        { return "document nested too deeply" }
func (tooDeepError) Is(target error) bool { return target == ErrMalformed }

// Error describes a problem with a message. Offset is the byte offset into
// the message (the uncompressed message for OP_COMPRESSED) where it was found.
type Error struct {
	OpCode OpCode // 0 when the op code was not known yet
	Offset int
	Reason string
	Err    error // one of the sentinel errors
}

// Error implements error.
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("wire: ")
	if e.OpCode != 0 {
		sb.WriteString(e.OpCode.String())
		sb.WriteString(": ")
	}
	if e.Err != nil {
		sb.WriteString(e.Err.Error())
	} else {
		sb.WriteString("error")
	}
	sb.WriteString(" at offset ")
	sb.WriteString(strconv.Itoa(e.Offset))
	if e.Reason != "" {
		sb.WriteString(": ")
		sb.WriteString(e.Reason)
	}
	return sb.String()
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// CommandName returns the first key of a command document, which by
// convention names the command ("" if the document is empty or unreadable).
func CommandName(body bson.Raw) string {
	if len(body) < 5 || body[4] == 0 {
		return ""
	}
	for i := 5; i < len(body); i++ {
		if body[i] == 0 {
			return string(body[5:i])
		}
	}
	return ""
}
