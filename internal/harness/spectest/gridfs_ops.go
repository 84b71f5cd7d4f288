package spectest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// bucketEntity is a GridFS bucket.
type bucketEntity struct {
	client *clientEntity
	b      *sturdy.Bucket
}

// createBucket creates a bucket entity ({id, database, bucketOptions}).
func (tr *testRun) createBucket(_ context.Context, id string, spec bson.Raw) error {
	db, err := lookup[*databaseEntity](tr.entities, lookupString(spec, "database"))
	if err != nil {
		return err
	}
	o := &sturdy.BucketOptions{}
	if bo, ok := spec.Lookup("bucketOptions").DocumentOK(); ok {
		elems, _ := bo.Elements()
		for _, e := range elems {
			switch e.Key() {
			case "bucketName":
				o.Name = e.Value().StringValue()
			case "chunkSizeBytes":
				n, _ := asInt(e.Value())
				o.ChunkSize = int32(n)
			case "readPreference":
				if o.ReadPreference, err = readPreference(e.Value()); err != nil {
					return err
				}
			case "writeConcern":
				if o.WriteConcern, err = writeConcern(e.Value()); err != nil {
					return err
				}
			case "readConcern":
				rc, _ := e.Value().DocumentOK()
				o.ReadConcern = lookupString(rc, "level")
			case "timeoutMS":
				n, _ := asInt(e.Value())
				d := time.Duration(n) * time.Millisecond
				o.Timeout = &d
			default:
				return unsupportedf("bucket option %q", e.Key())
			}
		}
	}
	return tr.entities.add(id, &bucketEntity{client: db.client, b: db.db.GridFSBucket(o)})
}

// bucketOperations are the GridFS operations the runner supports.
var bucketOperations = opTable[*bucketEntity]{
	"download":       bucketDownload,
	"downloadByName": bucketDownloadByName,
	"upload":         bucketUpload,
	"delete":         bucketDelete,
	"rename":         bucketRename,
	"drop":           bucketDrop,
	"find":           bucketFind,
}

// fileID reads the id argument a bucket operation needs.
func fileID(a *args) (any, error) {
	id, ok := a.get("id")
	if !ok {
		return nil, &runnerError{fmt.Errorf("%s needs an id", a.op)}
	}
	return native(id), nil
}

// downloaded is the result of a download: the file's bytes, or the error
// download returned.
func downloaded(download func(w *bytes.Buffer) error) (opResult, error) {
	var buf bytes.Buffer
	if err := download(&buf); err != nil {
		return opResult{}, err
	}
	return value(bson.Binary{Data: buf.Bytes()})
}

func bucketDownload(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	id, err := fileID(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		return downloaded(func(w *bytes.Buffer) error { _, err := e.b.DownloadToStream(ctx, id, w); return err })
	})
}

func bucketDownloadByName(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	name := a.str("filename")
	o := &sturdy.DownloadByNameOptions{}
	if v, ok := a.get("revision"); ok {
		n, _ := asInt(v)
		r := int32(n)
		o.Revision = &r
	}
	return checked(a, func() (opResult, error) {
		return downloaded(func(w *bytes.Buffer) error { _, err := e.b.DownloadToStreamByName(ctx, name, w, o); return err })
	})
}

func bucketUpload(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	name := a.str("filename")
	src, err := a.doc("source")
	if err != nil {
		return opResult{}, err
	}
	hexStr, ok := src.Lookup("$$hexBytes").StringValueOK()
	if !ok {
		return opResult{}, &runnerError{fmt.Errorf("upload source must be {$$hexBytes: ...}, got %s", docJSON(src))}
	}
	data, err := hex.DecodeString(hexStr)
	if err != nil {
		return opResult{}, &runnerError{fmt.Errorf("upload source: %w", err)}
	}
	o := &sturdy.UploadOptions{ChunkSize: int32(a.int64("chunkSizeBytes")), Metadata: a.any("metadata")}
	return checked(a, func() (opResult, error) {
		return valueResult(e.b.UploadFromStream(ctx, name, bytes.NewReader(data), o))
	})
}

func bucketDelete(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	id, err := fileID(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) { return opResult{}, e.b.Delete(ctx, id) })
}

func bucketRename(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	id, err := fileID(a)
	if err != nil {
		return opResult{}, err
	}
	name := a.str("newFilename")
	return checked(a, func() (opResult, error) { return opResult{}, e.b.Rename(ctx, id, name) })
}

func bucketDrop(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	return checked(a, func() (opResult, error) { return opResult{}, e.b.Drop(ctx) })
}

func bucketFind(ctx context.Context, e *bucketEntity, a *args) (opResult, error) {
	f, o, err := findArgs(a)
	if err != nil {
		return opResult{}, err
	}
	return checked(a, func() (opResult, error) {
		cur, err := e.b.Find(ctx, f, o)
		return cursorResult(ctx, cur, err)
	})
}
