package sturdy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/csot"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// GridFS errors; the errors a download returns wrap them with details.
var (
	// ErrFileNotFound: no files document has the id (or name and revision).
	ErrFileNotFound = errors.New("sturdy: GridFS file not found")
	// ErrCorruptFile: the chunks do not add up to the file (a chunk is
	// missing, out of order, of the wrong size, or extra).
	ErrCorruptFile = errors.New("sturdy: GridFS file is corrupt")
)

// DefaultChunkSize is GridFS's default chunk size, 255 KiB.
const DefaultChunkSize = 255 * 1024

// BucketOptions are the options of a GridFS bucket; the zero value is the
// "fs" bucket with 255 KiB chunks and the database's read preference,
// read concern and write concern.
type BucketOptions struct {
	Name           string // "" → "fs"
	ChunkSize      int32  // 0 → DefaultChunkSize
	ReadPreference *ReadPreference
	ReadConcern    string
	WriteConcern   *WriteConcern
	// Timeout is the timeoutMS of the bucket's operations: nil inherits
	// the database's, a pointer to 0 means no limit.
	Timeout *time.Duration
}

// Bucket is a GridFS bucket: files stored as a <name>.files document and
// numbered <name>.chunks documents. Downloads use the retryable-read path
// (a find on each collection).
type Bucket struct {
	name      string
	chunkSize int32
	files     *Collection
	chunks    *Collection

	indexMu      sync.Mutex
	indexesReady bool
}

// GridFSBucket returns a handle to a GridFS bucket. Nothing is sent to the
// server.
func (db *Database) GridFSBucket(opts *BucketOptions) *Bucket {
	o := BucketOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "fs"
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	co := &CollectionOptions{ReadPreference: o.ReadPreference, ReadConcernLevel: o.ReadConcern, WriteConcern: o.WriteConcern, Timeout: o.Timeout}
	return &Bucket{
		name:      o.Name,
		chunkSize: o.ChunkSize,
		files:     db.Collection(o.Name+".files", co),
		chunks:    db.Collection(o.Name+".chunks", co),
	}
}

// begin starts an operation under the bucket's timeoutMS (see csot).
func (b *Bucket) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	return csot.Start(ctx, b.files.timeout)
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.name }

// GridFSFile is a files collection document.
type GridFSFile struct {
	ID         any       `bson:"_id"`
	Length     int64     `bson:"length"`
	ChunkSize  int32     `bson:"chunkSize"`
	UploadDate time.Time `bson:"uploadDate"`
	Filename   string    `bson:"filename"`
	Metadata   bson.Raw  `bson:"metadata,omitempty"`
}

// DownloadStream reads one file's chunks in order, checking each. It reads
// with the context given when it was opened (io.Reader has none); Close
// releases the chunks cursor. Under timeoutMS the timeout bounds the
// stream's whole life, from its opening to its Close, as the CSOT spec
// says for GridFS streams.
type DownloadStream struct {
	ctx     context.Context
	cancel  context.CancelFunc
	b       *Bucket
	file    GridFSFile
	cursor  *Cursor // nil until the first Read, and for an empty file
	n       int64   // chunks read
	nChunks int64
	buf     []byte // unread part of the current chunk
	read    int64
	err     error
	closed  bool
}

// File returns the files document of the stream.
func (s *DownloadStream) File() GridFSFile { return s.file }

// OpenDownloadStream opens the file with the given _id.
func (b *Bucket) OpenDownloadStream(ctx context.Context, id any) (*DownloadStream, error) {
	idv, err := toValue(id)
	if err != nil {
		return nil, err
	}
	return b.openFile(ctx, bson.D{{Key: "_id", Value: idv}}, nil)
}

// DownloadByNameOptions select a revision of a file name: 0 is the
// original, 1 the first revision..., -1 (and the nil options) the most
// recent, -2 the one before...
type DownloadByNameOptions struct {
	Revision *int32
}

// OpenDownloadStreamByName opens a revision of the file called name
// (ordered by upload date).
func (b *Bucket) OpenDownloadStreamByName(ctx context.Context, name string, optList ...*DownloadByNameOptions) (*DownloadStream, error) {
	rev := int32(-1)
	if o := lastOptions(optList); o != nil && o.Revision != nil {
		rev = *o.Revision
	}
	fo := &FindOneOptions{Sort: bson.D{{Key: "uploadDate", Value: int32(1)}}, Skip: int64(rev)}
	if rev < 0 {
		fo = &FindOneOptions{Sort: bson.D{{Key: "uploadDate", Value: int32(-1)}}, Skip: int64(-rev - 1)}
	}
	return b.openFile(ctx, bson.D{{Key: "filename", Value: name}}, fo)
}

// openFile finds the files document; the chunks are found at the first
// Read. The stream's timeout starts here and ends at Close.
func (b *Bucket) openFile(ctx context.Context, filter bson.D, fo *FindOneOptions) (_ *DownloadStream, err error) {
	ctx, cancel := b.begin(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	var f GridFSFile
	if err := b.files.FindOne(ctx, filter, fo).Decode(&f); err != nil {
		if errors.Is(err, ErrNoDocuments) {
			return nil, fmt.Errorf("%w: %s", ErrFileNotFound, bson.Raw(mustMarshal(filter)))
		}
		return nil, err
	}
	if f.Length < 0 || (f.Length > 0 && f.ChunkSize <= 0) {
		return nil, fmt.Errorf("%w: length %d, chunkSize %d", ErrCorruptFile, f.Length, f.ChunkSize)
	}
	s := &DownloadStream{ctx: ctx, cancel: cancel, b: b, file: f}
	if f.Length > 0 {
		s.nChunks = (f.Length + int64(f.ChunkSize) - 1) / int64(f.ChunkSize)
	}
	return s, nil
}

// openChunks opens the cursor over the file's chunks, in order.
func (s *DownloadStream) openChunks() error {
	idv, err := toValue(s.file.ID)
	if err != nil {
		return err
	}
	cur, err := s.b.chunks.Find(s.ctx, bson.D{{Key: "files_id", Value: idv}}, &FindOptions{Sort: bson.D{{Key: "n", Value: int32(1)}}})
	if err != nil {
		return err
	}
	s.cursor = cur
	return nil
}

func mustMarshal(d bson.D) []byte {
	b, _ := bson.Marshal(d)
	return b
}

// Read reads the file's bytes; it returns io.EOF at the end, and an error
// wrapping ErrCorruptFile when a chunk is missing or of the wrong size.
func (s *DownloadStream) Read(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("sturdy: read from a closed download stream")
	}
	n := 0
	for n < len(p) {
		if len(s.buf) == 0 {
			if s.err != nil {
				break
			}
			s.err = s.nextChunk()
			if len(s.buf) == 0 {
				break
			}
		}
		c := copy(p[n:], s.buf)
		s.buf = s.buf[c:]
		n += c
		s.read += int64(c)
	}
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// nextChunk loads the next chunk into buf, or returns io.EOF after the
// last one (checking there is no extra chunk).
func (s *DownloadStream) nextChunk() error {
	if s.nChunks == 0 {
		return io.EOF
	}
	if s.cursor == nil {
		if err := s.openChunks(); err != nil {
			return err
		}
	}
	if s.n == s.nChunks {
		if s.cursor.Next(s.ctx) {
			return fmt.Errorf("%w: extra chunk after the last (n = %d)", ErrCorruptFile, s.n)
		}
		if err := s.cursor.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	if !s.cursor.Next(s.ctx) {
		if err := s.cursor.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: chunk %d of %d is missing", ErrCorruptFile, s.n, s.nChunks)
	}
	var chunk struct {
		N    int64       `bson:"n"`
		Data bson.Binary `bson:"data"`
	}
	if err := bson.Unmarshal(s.cursor.Current, &chunk); err != nil {
		return fmt.Errorf("%w: chunk %d: %v", ErrCorruptFile, s.n, err)
	}
	if chunk.N != s.n {
		return fmt.Errorf("%w: expected chunk %d, found chunk %d", ErrCorruptFile, s.n, chunk.N)
	}
	want := int64(s.file.ChunkSize)
	if s.n == s.nChunks-1 {
		want = s.file.Length - (s.nChunks-1)*int64(s.file.ChunkSize)
	}
	if int64(len(chunk.Data.Data)) != want {
		return fmt.Errorf("%w: chunk %d has %d bytes, expected %d", ErrCorruptFile, s.n, len(chunk.Data.Data), want)
	}
	s.n++
	s.buf = chunk.Data.Data
	return nil
}

// Close releases the chunks cursor (under timeoutMS, within the stream's
// timeout).
func (s *DownloadStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	defer s.cancel()
	if s.cursor == nil {
		return nil
	}
	ctx := s.ctx
	if !csot.Active(ctx) {
		ctx = context.WithoutCancel(ctx) // free the server cursor even after ctx ended
	}
	return s.cursor.Close(ctx)
}

// DownloadToStream writes the file with the given _id to w and returns the
// number of bytes written.
func (b *Bucket) DownloadToStream(ctx context.Context, id any, w io.Writer) (int64, error) {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	s, err := b.OpenDownloadStream(ctx, id)
	if err != nil {
		return 0, err
	}
	return copyAndClose(s, w)
}

// DownloadToStreamByName writes a revision of the file called name to w.
func (b *Bucket) DownloadToStreamByName(ctx context.Context, name string, w io.Writer, optList ...*DownloadByNameOptions) (int64, error) {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	s, err := b.OpenDownloadStreamByName(ctx, name, optList...)
	if err != nil {
		return 0, err
	}
	return copyAndClose(s, w)
}

func copyAndClose(s *DownloadStream, w io.Writer) (int64, error) {
	n, err := io.Copy(w, s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// UploadOptions are the options of UploadFromStream.
type UploadOptions struct {
	ID        any   // nil → a new ObjectID
	ChunkSize int32 // 0 → the bucket's
	Metadata  any
}

// UploadFromStream stores the contents of r as a new file (a new revision
// when the name exists) and returns its _id. The chunks are written first
// and the files document last, so a failed upload leaves no visible file
// (its chunks are removed on a best-effort basis). Under timeoutMS the
// timeout bounds the whole upload, reading r included (r's reads are not
// interrupted: a slow r can make the upload outlast it).
func (b *Bucket) UploadFromStream(ctx context.Context, filename string, r io.Reader, optList ...*UploadOptions) (any, error) {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	s, err := b.OpenUploadStream(ctx, filename, optList...)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(s, r); err != nil {
		s.closed = true
		b.abort(ctx, s.id)
		return nil, err
	}
	if err := s.Close(); err != nil {
		b.abort(ctx, s.id)
		return nil, err
	}
	return s.id, nil
}

// UploadStream writes a new file chunk by chunk as it is written to; Close
// writes the last chunk and the files document, which makes the file
// visible. Like DownloadStream it works with the context given when it
// was opened, and under timeoutMS the timeout bounds the stream's whole
// life, from OpenUploadStream to Close or Abort. An UploadStream is for
// one goroutine at a time.
type UploadStream struct {
	ctx      context.Context
	cancel   context.CancelFunc
	b        *Bucket
	id       any
	filename string
	o        UploadOptions
	buf      []byte // the chunk being filled
	n        int32  // chunks written
	length   int64
	err      error // a failed write: the stream is unusable
	closed   bool
}

// ErrUploadClosed: a write, Close or Abort after Close or Abort.
var ErrUploadClosed = errors.New("sturdy: GridFS upload stream already closed or aborted")

// OpenUploadStream opens a stream that stores what is written to it as a
// new file called filename (a new revision when the name exists). The
// bucket's indexes are made now, before anything is written.
func (b *Bucket) OpenUploadStream(ctx context.Context, filename string, optList ...*UploadOptions) (_ *UploadStream, err error) {
	ctx, cancel := b.begin(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	o := UploadOptions{}
	if p := lastOptions(optList); p != nil {
		o = *p
	}
	if o.ID == nil {
		o.ID = bson.NewObjectID()
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = b.chunkSize
	}
	if err := b.ensureIndexes(ctx); err != nil {
		return nil, err
	}
	return &UploadStream{ctx: ctx, cancel: cancel, b: b, id: o.ID, filename: filename, o: o, buf: make([]byte, 0, o.ChunkSize)}, nil
}

// ID returns the _id the file gets.
func (s *UploadStream) ID() any { return s.id }

// Write buffers p, inserting each chunk as it fills.
func (s *UploadStream) Write(p []byte) (int, error) {
	if s.closed {
		return 0, ErrUploadClosed
	}
	if s.err != nil {
		return 0, s.err
	}
	written := 0
	for len(p) > 0 {
		k := min(len(p), cap(s.buf)-len(s.buf))
		s.buf = append(s.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(s.buf) == cap(s.buf) {
			if err := s.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush inserts the buffered chunk.
func (s *UploadStream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	chunk := bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "files_id", Value: s.id}, {Key: "n", Value: s.n},
		{Key: "data", Value: bson.Binary{Data: append([]byte(nil), s.buf...)}}}
	if _, err := s.b.chunks.InsertOne(s.ctx, chunk); err != nil {
		s.err = err
		return err
	}
	s.n++
	s.length += int64(len(s.buf))
	s.buf = s.buf[:0]
	return nil
}

// Close inserts the last chunk and the files document. On error the
// chunks written stay until Abort removes them.
func (s *UploadStream) Close() error {
	if s.closed {
		return ErrUploadClosed
	}
	if s.err != nil {
		return s.err
	}
	if err := s.flush(); err != nil {
		return err // the stream stays open for Abort
	}
	file := bson.D{{Key: "_id", Value: s.id}, {Key: "length", Value: s.length}, {Key: "chunkSize", Value: s.o.ChunkSize},
		{Key: "uploadDate", Value: bson.NewDateTimeFromTime(time.Now())}, {Key: "filename", Value: s.filename}}
	if s.o.Metadata != nil {
		file = append(file, bson.E{Key: "metadata", Value: s.o.Metadata})
	}
	if _, err := s.b.files.InsertOne(s.ctx, file); err != nil {
		s.err = err
		return err
	}
	s.closed = true
	s.cancel()
	return nil
}

// Abort removes the chunks written so far; the file never becomes
// visible. Under timeoutMS it runs within the stream's timeout.
func (s *UploadStream) Abort() error {
	if s.closed {
		return ErrUploadClosed
	}
	s.closed = true
	defer s.cancel()
	_, err := s.b.chunks.DeleteMany(s.ctx, bson.D{{Key: "files_id", Value: s.id}})
	return err
}

// abort removes the chunks of a failed upload.
func (b *Bucket) abort(ctx context.Context, id any) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killCursorTimeout)
	defer cancel()
	_, _ = b.chunks.DeleteMany(actx, bson.D{{Key: "files_id", Value: id}})
}

// ensureIndexes creates the bucket's indexes before its first upload when
// the files collection is empty (the GridFS convention, so that a bucket
// in use is never re-indexed).
func (b *Bucket) ensureIndexes(ctx context.Context) error {
	b.indexMu.Lock()
	defer b.indexMu.Unlock()
	if b.indexesReady {
		return nil
	}
	err := b.files.FindOne(ctx, bson.D{}, &FindOneOptions{Projection: bson.D{{Key: "_id", Value: int32(1)}}}).Err()
	if err == nil {
		b.indexesReady = true
		return nil
	}
	if !errors.Is(err, ErrNoDocuments) {
		return err
	}
	filesKeys := bson.D{{Key: "filename", Value: int32(1)}, {Key: "uploadDate", Value: int32(1)}}
	if has, err := hasIndex(ctx, b.files, filesKeys); err != nil {
		return err
	} else if !has {
		if _, err := b.files.CreateIndex(ctx, IndexModel{Keys: filesKeys}); err != nil {
			return err
		}
	}
	chunksKeys := bson.D{{Key: "files_id", Value: int32(1)}, {Key: "n", Value: int32(1)}}
	if has, err := hasIndex(ctx, b.chunks, chunksKeys); err != nil {
		return err
	} else if !has {
		unique := true
		if _, err := b.chunks.CreateIndex(ctx, IndexModel{Keys: chunksKeys, Options: &IndexOptions{Unique: &unique}}); err != nil {
			return err
		}
	}
	b.indexesReady = true
	return nil
}

// hasIndex reports whether coll has an index on keys (directions compared
// as numbers, as the GridFS spec asks: 1 and 1.0 are the same index).
func hasIndex(ctx context.Context, coll *Collection, keys bson.D) (bool, error) {
	cur, err := coll.ListIndexes(ctx)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && ce.Code == mongoerr.CodeNamespaceNotFound { // NamespaceNotFound: no collection yet
			return false, nil
		}
		return false, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		k, ok := cur.Current.Lookup("key").DocumentOK()
		if !ok {
			continue
		}
		elems, _ := k.Elements()
		if len(elems) != len(keys) {
			continue
		}
		same := true
		for i, e := range elems {
			n, ok := e.Value().AsFloat64OK()
			if e.Key() != keys[i].Key || !ok || n != float64(keys[i].Value.(int32)) {
				same = false
				break
			}
		}
		if same {
			return true, nil
		}
	}
	return false, cur.Err()
}

// Find returns a cursor over the bucket's files documents matching filter.
func (b *Bucket) Find(ctx context.Context, filter any, optList ...*FindOptions) (*Cursor, error) {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	return b.files.Find(ctx, filter, optList...)
}

// Delete removes the file with the given _id: its files document, then its
// chunks. A missing files document is ErrFileNotFound (its stray chunks are
// still removed). Both deletes share the operation's timeout.
func (b *Bucket) Delete(ctx context.Context, id any) error {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	idv, err := toValue(id)
	if err != nil {
		return err
	}
	res, err := b.files.DeleteOne(ctx, bson.D{{Key: "_id", Value: idv}})
	if err != nil {
		return err
	}
	if _, err := b.chunks.DeleteMany(ctx, bson.D{{Key: "files_id", Value: idv}}); err != nil {
		return err
	}
	if res.DeletedCount == 0 {
		return fmt.Errorf("%w: _id %v", ErrFileNotFound, id)
	}
	return nil
}

// Rename sets the filename of the file with the given _id.
func (b *Bucket) Rename(ctx context.Context, id any, newFilename string) error {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	idv, err := toValue(id)
	if err != nil {
		return err
	}
	res, err := b.files.UpdateOne(ctx, bson.D{{Key: "_id", Value: idv}}, bson.D{{Key: "$set", Value: bson.D{{Key: "filename", Value: newFilename}}}})
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%w: _id %v", ErrFileNotFound, id)
	}
	return nil
}

// Drop drops the bucket's files and chunks collections.
func (b *Bucket) Drop(ctx context.Context) error {
	ctx, cancel := b.begin(ctx)
	defer cancel()
	if err := b.files.Drop(ctx); err != nil {
		return err
	}
	if err := b.chunks.Drop(ctx); err != nil {
		return err
	}
	b.indexMu.Lock()
	b.indexesReady = false
	b.indexMu.Unlock()
	return nil
}
