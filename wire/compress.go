package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// compressedPrefixLen is originalOpcode + uncompressedSize + compressorId.
const compressedPrefixLen = 4 + 4 + 1

// zstdEncoder and zstdDecoder are shared: EncodeAll and DecodeAll are safe
// for concurrent use and neither starts goroutines when used this way.
var (
	zstdEncoder *zstd.Encoder
	zstdDecoder *zstd.Decoder
)

func init() {
	var err error
	zstdEncoder, err = zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(8<<20),
		zstd.WithZeroFrames(true))
	if err != nil {
		panic("wire: creating zstd encoder: " + err.Error())
	}
	zstdDecoder, err = zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		// DecodeAll must never produce more than the capacity of the
		// destination, which Decode sizes to the declared uncompressedSize.
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(1<<31),
		zstd.WithDecoderMaxWindow(1<<27))
	if err != nil {
		panic("wire: creating zstd decoder: " + err.Error())
	}
}

// zlibWriterPools holds one pool per zlib level (-2 ... 9); a zlib.Writer's
// level cannot be changed by Reset.
var zlibWriterPools [12]sync.Pool

type zlibWriter struct {
	w   *zlib.Writer
	out appendWriter
}

// appendWriter is an io.Writer that appends to a slice.
type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

var zlibReaderPool sync.Pool // of *zlibReader

type zlibReader struct {
	r   io.ReadCloser // also a zlib.Resetter
	src bytes.Reader
}

// AppendCompressed wraps msg, one complete uncompressed message including its
// header, in an OP_COMPRESSED message appended to dst. The requestID and
// responseTo of msg are kept. zlibLevel is used only for CompressorZlib and
// must be between -2 and 9 (-1 is zlib's default level).
func AppendCompressed(dst []byte, msg []byte, c Compressor, zlibLevel int) ([]byte, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return dst, err
	}
	if int(h.MessageLength) != len(msg) {
		return dst, &Error{OpCode: h.OpCode, Reason: "declared length " + strconv.Itoa(int(h.MessageLength)) + " does not match message of " + strconv.Itoa(len(msg)) + " bytes", Err: ErrMalformed}
	}
	if h.OpCode == OpCompressed {
		return dst, &Error{OpCode: h.OpCode, Reason: "cannot compress an OP_COMPRESSED message", Err: ErrMalformed}
	}
	if c > CompressorZstd {
		return dst, &Error{OpCode: OpCompressed, Reason: "unknown compressor " + c.String(), Err: ErrUnsupportedCompressor}
	}
	if c == CompressorZlib && (zlibLevel < zlib.HuffmanOnly || zlibLevel > zlib.BestCompression) {
		return dst, &Error{OpCode: OpCompressed, Reason: "zlib level " + strconv.Itoa(zlibLevel) + " out of range", Err: ErrUnsupportedCompressor}
	}
	start := len(dst)
	src := msg[HeaderLen:]
	dst = appendHeader(dst, 0, h.RequestID, h.ResponseTo, OpCompressed)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.OpCode))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
	dst = append(dst, byte(c))
	switch c {
	case CompressorNoop:
		dst = append(dst, src...)
	case CompressorSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst[:start], &Error{OpCode: OpCompressed, Reason: "message too large for snappy", Err: ErrMessageTooLarge}
		}
		dst = slices.Grow(dst, n)
		room := dst[len(dst) : len(dst)+n]
		enc := s2.EncodeSnappy(room, src)
		if len(enc) > 0 && &enc[0] != &room[0] {
			copy(room, enc) // not expected: the encoder uses room when it is big enough
		}
		dst = dst[:len(dst)+len(enc)]
	case CompressorZlib:
		pool := &zlibWriterPools[zlibLevel-zlib.HuffmanOnly]
		zw, _ := pool.Get().(*zlibWriter)
		if zw == nil {
			zw = &zlibWriter{}
			w, err := zlib.NewWriterLevel(&zw.out, zlibLevel)
			if err != nil {
				return dst[:start], &Error{OpCode: OpCompressed, Reason: err.Error(), Err: ErrUnsupportedCompressor}
			}
			zw.w = w
		} else {
			zw.w.Reset(&zw.out)
		}
		zw.out.b = dst
		_, werr := zw.w.Write(src)
		cerr := zw.w.Close()
		dst = zw.out.b
		zw.out.b = nil
		pool.Put(zw)
		if werr != nil || cerr != nil {
			return dst[:start], errors.Join(werr, cerr)
		}
	case CompressorZstd:
		dst = zstdEncoder.EncodeAll(src, dst)
	}
	patchLength(dst, start)
	return dst, nil
}

// decompress decodes the payload of an OP_COMPRESSED message (b is the whole
// message and h its parsed header). It returns the header of the original
// message, its 16 header bytes (which the checksum covers) and its body. The
// body aliases b for the noop compressor and is freshly allocated, exactly
// uncompressedSize bytes, otherwise.
func decompress(b []byte, h Header, maxSize int32) (inner Header, hdr [HeaderLen]byte, body []byte, c Compressor, err error) {
	rest := b[HeaderLen:]
	if len(rest) < compressedPrefixLen {
		return inner, hdr, nil, 0, &Error{OpCode: OpCompressed, Offset: len(b), Reason: "message too short for OP_COMPRESSED fields", Err: ErrMalformed}
	}
	orig := OpCode(binary.LittleEndian.Uint32(rest[0:]))
	size := int32(binary.LittleEndian.Uint32(rest[4:]))
	c = Compressor(rest[8])
	data := rest[compressedPrefixLen:]
	switch orig {
	case OpMsg, OpQuery, OpReply:
	default:
		return inner, hdr, nil, c, &Error{OpCode: OpCompressed, Offset: HeaderLen, Reason: "original op code " + orig.String() + " cannot be compressed", Err: ErrUnsupportedOpCode}
	}
	if size < 0 {
		return inner, hdr, nil, c, &Error{OpCode: OpCompressed, Offset: HeaderLen + 4, Reason: "negative uncompressedSize " + strconv.Itoa(int(size)), Err: ErrMalformed}
	}
	total := int64(size) + HeaderLen
	if total > int64(maxSize) {
		return inner, hdr, nil, c, &Error{OpCode: OpCompressed, Offset: HeaderLen + 4, Reason: "uncompressed size " + strconv.FormatInt(total, 10) + " exceeds maximum " + strconv.Itoa(int(maxSize)), Err: ErrMessageTooLarge}
	}
	if c > CompressorZstd {
		return inner, hdr, nil, c, &Error{OpCode: OpCompressed, Offset: HeaderLen + 8, Reason: "unknown compressor id " + strconv.Itoa(int(c)), Err: ErrUnsupportedCompressor}
	}
	body, err = decompressPayload(c, data, int(size))
	if err != nil {
		return inner, hdr, nil, c, &Error{OpCode: OpCompressed, Offset: HeaderLen + compressedPrefixLen, Reason: c.String() + ": " + err.Error(), Err: ErrMalformed}
	}
	inner = Header{MessageLength: int32(total), RequestID: h.RequestID, ResponseTo: h.ResponseTo, OpCode: orig}
	appendHeader(hdr[:0], inner.MessageLength, inner.RequestID, inner.ResponseTo, inner.OpCode)
	return inner, hdr, body, c, nil
}

// decompressPayload decompresses data, which must expand to exactly size
// bytes; it never allocates or produces more than size bytes.
func decompressPayload(c Compressor, data []byte, size int) ([]byte, error) {
	switch c {
	case CompressorNoop:
		if len(data) != size {
			return nil, errors.New("payload is " + strconv.Itoa(len(data)) + " bytes, uncompressedSize says " + strconv.Itoa(size))
		}
		return data, nil
	case CompressorSnappy:
		n, err := snappy.DecodedLen(data)
		if err != nil {
			return nil, err
		}
		if n != size {
			return nil, errors.New("decoded length " + strconv.Itoa(n) + " does not match uncompressedSize " + strconv.Itoa(size))
		}
		out := make([]byte, size)
		dec, err := snappy.Decode(out, data)
		if err != nil {
			return nil, err
		}
		if len(dec) != size {
			return nil, errors.New("decoded length does not match uncompressedSize")
		}
		return dec, nil
	case CompressorZlib:
		out := make([]byte, size)
		zr, _ := zlibReaderPool.Get().(*zlibReader)
		if zr == nil {
			zr = &zlibReader{}
		}
		defer func() {
			zr.src.Reset(nil)
			zlibReaderPool.Put(zr)
		}()
		zr.src.Reset(data)
		if zr.r == nil {
			r, err := zlib.NewReader(&zr.src)
			if err != nil {
				return nil, err
			}
			zr.r = r
		} else if err := zr.r.(zlib.Resetter).Reset(&zr.src, nil); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(zr.r, out); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, errors.New("stream is shorter than uncompressedSize")
			}
			return nil, err
		}
		// The stream must end exactly here; reading to its end also
		// verifies the adler-32 trailer.
		var one [1]byte
		n, err := io.ReadFull(zr.r, one[:])
		if n > 0 {
			return nil, errors.New("stream is longer than uncompressedSize")
		}
		if err != io.EOF {
			return nil, err
		}
		return out, nil
	case CompressorZstd:
		out := make([]byte, 0, size)
		dec, err := zstdDecoder.DecodeAll(data, out)
		if err != nil {
			return nil, err
		}
		if len(dec) != size || cap(dec) != size {
			return nil, errors.New("decoded " + strconv.Itoa(len(dec)) + " bytes, uncompressedSize says " + strconv.Itoa(size))
		}
		return dec, nil
	}
	return nil, ErrUnsupportedCompressor
}
