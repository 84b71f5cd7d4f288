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
func (tr *testRun) createBucket(id string, spec bson.Raw) error {
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

// bucketOps are the GridFS operations the runner supports.
func bucketOps(e *bucketEntity) map[string]opFunc {
	return map[string]opFunc{
		"download": func(ctx context.Context, a *args) (opResult, error) {
			id, ok := a.get("id")
			if !ok {
				return opResult{}, &runnerError{fmt.Errorf("download needs an id")}
			}
			return checked(a, func() (opResult, error) {
				var buf bytes.Buffer
				if _, err := e.b.DownloadToStream(ctx, native(id), &buf); err != nil {
					return opResult{}, err
				}
				return value(bson.Binary{Data: buf.Bytes()})
			})
		},
		"upload": func(ctx context.Context, a *args) (opResult, error) {
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
				id, err := e.b.UploadFromStream(ctx, name, bytes.NewReader(data), o)
				if err != nil {
					return opResult{}, err
				}
				return value(id)
			})
		},
		"delete": func(ctx context.Context, a *args) (opResult, error) {
			id, ok := a.get("id")
			if !ok {
				return opResult{}, &runnerError{fmt.Errorf("delete needs an id")}
			}
			return checked(a, func() (opResult, error) { return opResult{}, e.b.Delete(ctx, native(id)) })
		},
		"rename": func(ctx context.Context, a *args) (opResult, error) {
			id, ok := a.get("id")
			if !ok {
				return opResult{}, &runnerError{fmt.Errorf("rename needs an id")}
			}
			name := a.str("newFilename")
			return checked(a, func() (opResult, error) { return opResult{}, e.b.Rename(ctx, native(id), name) })
		},
		"drop": func(ctx context.Context, a *args) (opResult, error) {
			return checked(a, func() (opResult, error) { return opResult{}, e.b.Drop(ctx) })
		},
		"find": func(ctx context.Context, a *args) (opResult, error) {
			f, err := a.filter()
			if err != nil {
				return opResult{}, err
			}
			o, err := findOptions(a)
			if err != nil {
				return opResult{}, err
			}
			return checked(a, func() (opResult, error) {
				cur, err := e.b.Find(ctx, f, o)
				return cursorResult(ctx, cur, err)
			})
		},
		"downloadByName": func(ctx context.Context, a *args) (opResult, error) {
			name := a.str("filename")
			o := &sturdy.DownloadByNameOptions{}
			if v, ok := a.get("revision"); ok {
				n, _ := asInt(v)
				r := int32(n)
				o.Revision = &r
			}
			return checked(a, func() (opResult, error) {
				var buf bytes.Buffer
				if _, err := e.b.DownloadToStreamByName(ctx, name, &buf, o); err != nil {
					return opResult{}, err
				}
				return value(bson.Binary{Data: buf.Bytes()})
			})
		},
	}
}
