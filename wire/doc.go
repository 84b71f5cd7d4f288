// Package wire encodes and decodes MongoDB wire-protocol messages.
//
// It is the codec shared by the sturdy client and by the test servers
// (blackpipe, mongosim). It understands the message header, OP_MSG (body and
// document-sequence sections, flag bits and the optional CRC-32C checksum),
// the legacy OP_QUERY/OP_REPLY pair that is still used for the initial
// handshake, and OP_COMPRESSED with the noop, snappy, zlib and zstd
// compressors.
//
// The package has no I/O policy of its own: ReadMessage frames one message
// from an io.Reader, and everything else works on byte slices.
//
// Encoders are append-style (AppendMsg, AppendQuery, AppendReply,
// AppendCompressed) so a caller can reuse one buffer per connection.
// Decode is zero-copy: the documents of a decoded message alias the input
// slice (or, for OP_COMPRESSED, a freshly decompressed buffer), so the input
// must not be reused while the message is in use.
//
// Input from the network is treated as hostile. Decode never reads past a
// declared length, validates every BSON document, enforces a maximum message
// size before allocating or decompressing, and reports problems as *Error
// values that wrap one of the sentinel errors (ErrMalformed,
// ErrMessageTooLarge, ErrChecksum, ErrUnsupportedOpCode,
// ErrUnsupportedCompressor) so callers can use errors.Is and errors.As.
package wire
