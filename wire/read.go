package wire

import (
	"fmt"
	"io"
	"slices"
	"strconv"
)

// readChunk bounds how much ReadMessage allocates ahead of the data actually
// received, so a peer cannot make it allocate maxSize bytes by sending a
// 16-byte header alone.
const readChunk = 1 << 20

// ReadMessage reads exactly one whole message from r into buf, growing it if
// needed, and returns the slice of buf that holds the message. A declared
// length below HeaderLen is rejected with ErrMalformed and one above maxSize
// (0 means DefaultMaxMessageSize) with ErrMessageTooLarge, before the body is
// read or buffer space allocated for it.
//
// A clean end of stream before the first byte returns io.EOF itself; an end
// of stream inside a message returns an error wrapping io.ErrUnexpectedEOF.
// Callers that need a deadline or cancellation set it on the underlying
// connection.
func ReadMessage(r io.Reader, buf []byte, maxSize int32) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	buf = slices.Grow(buf[:0], HeaderLen)[:HeaderLen]
	if n, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF && n == 0 {
			return buf[:0], io.EOF
		}
		return buf[:0], fmt.Errorf("wire: reading message header: %w", err)
	}
	h, err := ParseHeader(buf)
	if err != nil {
		return buf[:0], err
	}
	if h.MessageLength > maxSize {
		return buf[:0], &Error{OpCode: h.OpCode, Reason: "message length " + strconv.Itoa(int(h.MessageLength)) + " exceeds maximum " + strconv.Itoa(int(maxSize)), Err: ErrMessageTooLarge}
	}
	total := int(h.MessageLength)
	for len(buf) < total {
		next := total
		if cap(buf) < total {
			// Grow at most one chunk (or the current size) ahead of
			// what has arrived.
			next = min(total, len(buf)+max(len(buf), readChunk))
			buf = slices.Grow(buf, next-len(buf))
		}
		n, err := io.ReadFull(r, buf[len(buf):next])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf[:0], fmt.Errorf("wire: reading %s body (%d of %d bytes): %w", h.OpCode, len(buf), total, err)
		}
	}
	return buf, nil
}
