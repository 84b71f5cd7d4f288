package sturdy_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestGridFSUploadAndDownload(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	client := connect(t, cluster.URI(), nil)
	db := client.Database("db")
	b := db.GridFSBucket(&sturdy.BucketOptions{Name: "files", ChunkSize: 4})

	content := []byte("hello, gridfs!") // 14 bytes: chunks of 4, 4, 4, 2
	id, err := b.UploadFromStream(ctx, "greeting.txt", bytes.NewReader(content), &sturdy.UploadOptions{Metadata: d("lang", "en")})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection("files.chunks").CountDocuments(ctx, d("files_id", id)); err != nil || n != 4 {
		t.Fatalf("chunks: %d (%v), want 4", n, err)
	}
	idx, err := db.Collection("files.chunks").ListIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var indexes []bson.M
	if err := idx.All(ctx, &indexes); err != nil || len(indexes) != 2 {
		t.Fatalf("chunks indexes: %v (%v)", indexes, err)
	}

	var out bytes.Buffer
	n, err := b.DownloadToStream(ctx, id, &out)
	if err != nil || n != int64(len(content)) || !bytes.Equal(out.Bytes(), content) {
		t.Fatalf("DownloadToStream = %q, %d, %v", out.Bytes(), n, err)
	}

	// A second revision under the same name; by name picks the newest by
	// default and older ones by revision number.
	time.Sleep(5 * time.Millisecond)
	if _, err := b.UploadFromStream(ctx, "greeting.txt", bytes.NewReader([]byte("v2"))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rev  *int32
		want string
	}{{nil, "v2"}, {ptr(int32(0)), string(content)}, {ptr(int32(-2)), string(content)}, {ptr(int32(1)), "v2"}} {
		out.Reset()
		if _, err := b.DownloadToStreamByName(ctx, "greeting.txt", &out, &sturdy.DownloadByNameOptions{Revision: tc.rev}); err != nil || out.String() != tc.want {
			t.Fatalf("revision %v: %q, %v", tc.rev, out.String(), err)
		}
	}
	if _, err := b.OpenDownloadStreamByName(ctx, "greeting.txt", &sturdy.DownloadByNameOptions{Revision: ptr(int32(2))}); !errors.Is(err, sturdy.ErrFileNotFound) {
		t.Fatalf("revision 2: %v, want ErrFileNotFound", err)
	}

	// Reading in small pieces through the stream.
	s, err := b.OpenDownloadStream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.File().Length != int64(len(content)) || s.File().Filename != "greeting.txt" {
		t.Fatalf("file: %+v", s.File())
	}
	got, err := io.ReadAll(io.LimitReader(s, 100))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// An empty file has no chunks.
	emptyID, err := b.UploadFromStream(ctx, "empty", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if n, err := b.DownloadToStream(ctx, emptyID, &out); err != nil || n != 0 {
		t.Fatalf("empty file: %d, %v", n, err)
	}
	if _, err := b.OpenDownloadStream(ctx, bson.NewObjectID()); !errors.Is(err, sturdy.ErrFileNotFound) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestGridFSDetectsCorruptFiles(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	client := connect(t, cluster.URI(), nil)
	db := client.Database("db")
	files, chunks := db.Collection("fs.files"), db.Collection("fs.chunks")
	b := db.GridFSBucket(nil)

	file := func(id int32, length int64) {
		t.Helper()
		if _, err := files.InsertOne(ctx, d("_id", id, "length", length, "chunkSize", int32(4), "uploadDate", time.Now(), "filename", "f")); err != nil {
			t.Fatal(err)
		}
	}
	chunk := func(id int32, n int32, data string) {
		t.Helper()
		if _, err := chunks.InsertOne(ctx, d("files_id", id, "n", n, "data", bson.Binary{Data: []byte(data)})); err != nil {
			t.Fatal(err)
		}
	}
	file(1, 6) // chunk 1 missing
	chunk(1, 0, "abcd")
	file(2, 6) // last chunk too short
	chunk(2, 0, "abcd")
	chunk(2, 1, "e")
	file(3, 4) // an extra chunk
	chunk(3, 0, "abcd")
	chunk(3, 1, "zz")
	file(4, 8) // chunk 0 has the wrong size
	chunk(4, 0, "abc")
	chunk(4, 1, "defg")
	for id := int32(1); id <= 4; id++ {
		_, err := b.DownloadToStream(ctx, id, io.Discard)
		if !errors.Is(err, sturdy.ErrCorruptFile) {
			t.Errorf("file %d: %v, want ErrCorruptFile", id, err)
		}
	}
}

func TestGridFSDownloadIsRetried(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	rec := &recorder{}
	client := connect(t, cluster.URI(), func(o *sturdy.Options) { o.Monitor = rec.monitor() })
	b := client.Database("db").GridFSBucket(nil)
	id, err := b.UploadFromStream(ctx, "x", bytes.NewReader([]byte{0x11}))
	if err != nil {
		t.Fatal(err)
	}
	rec.reset()
	setFailPoint(t, cluster, d("configureFailPoint", "failCommand", "mode", d("times", 1),
		"data", d("failCommands", bson.A{"find"}, "closeConnection", true)))
	var out bytes.Buffer
	if _, err := b.DownloadToStream(ctx, id, &out); err != nil || !bytes.Equal(out.Bytes(), []byte{0x11}) {
		t.Fatalf("download: %x, %v", out.Bytes(), err)
	}
	finds := rec.startedNamed("find")
	if len(finds) != 3 || commandField(finds[0], "find").StringValue() != "fs.files" ||
		commandField(finds[1], "find").StringValue() != "fs.files" || commandField(finds[2], "find").StringValue() != "fs.chunks" {
		t.Fatalf("find commands: %d", len(finds))
	}
}

// Find, Rename, Delete and Drop act on the files and chunks collections, and
// report a missing file as ErrFileNotFound.
func TestGridFSFindRenameDeleteDrop(t *testing.T) {
	ctx := testCtx(t)
	cluster := mongosim.Start(t)
	client := connect(t, cluster.URI(), nil)
	db := client.Database("db")
	b := db.GridFSBucket(&sturdy.BucketOptions{ChunkSize: 4})
	id, err := b.UploadFromStream(ctx, "a.txt", bytes.NewReader([]byte("0123456789")))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Rename(ctx, id, "b.txt"); err != nil {
		t.Fatal(err)
	}
	cur, err := b.Find(ctx, d("filename", "b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var files []sturdy.GridFSFile
	if err := cur.All(ctx, &files); err != nil || len(files) != 1 || files[0].Length != 10 {
		t.Fatalf("Find after Rename: %+v (%v)", files, err)
	}
	if err := b.Rename(ctx, bson.NewObjectID(), "c.txt"); !errors.Is(err, sturdy.ErrFileNotFound) {
		t.Fatalf("Rename of a missing file: %v", err)
	}
	if err := b.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Collection("fs.chunks").CountDocuments(ctx, d("files_id", id)); err != nil || n != 0 {
		t.Fatalf("%d chunks left after Delete (%v)", n, err)
	}
	if err := b.Delete(ctx, id); !errors.Is(err, sturdy.ErrFileNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := b.UploadFromStream(ctx, "d.txt", bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if err := b.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := db.ListCollectionNames(ctx, d())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "fs.files" || n == "fs.chunks" {
			t.Errorf("%s still exists after Drop", n)
		}
	}
}
