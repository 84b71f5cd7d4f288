package mongoerr

import (
	"encoding/binary"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzFromReply: on any well-formed document (the wire layer validates a
// reply before anything reads it; the fuzzer's first find was a nested
// document running past its parent's end, which bson.Raw.Validate accepts
// when bytes follow the parent) FromReply does not panic and classifies
// the reply as its fields say, read here with bson.Raw's own lookups: no
// or a non-1 ok is a *CommandError carrying code, codeName and errmsg; ok
// 1 is a *WriteException exactly when writeErrors holds a document or
// writeConcernError is one, with one WriteError per such document; any
// other reply is a success.
func FuzzFromReply(f *testing.F) {
	for _, d := range []bson.D{
		{{Key: "ok", Value: 1.0}},
		{{Key: "ok", Value: int32(0)}, {Key: "code", Value: int32(11600)}, {Key: "codeName", Value: "InterruptedAtShutdown"}, {Key: "errmsg", Value: "shutting down"}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
		{{Key: "ok", Value: "1"}},
		{{Key: "n", Value: int32(1)}},
		{{Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000"}, {Key: "errInfo", Value: bson.D{{Key: "k", Value: 1}}}}, "not a document"}}, {Key: "ok", Value: int64(1)}},
		{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}, {Key: "codeName", Value: "ShutdownInProgress"}, {Key: "errmsg", Value: "x"}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}}},
		{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: "not a document"}, {Key: "writeErrors", Value: bson.A{}}},
		{{Key: "ok", Value: 1.0}, {Key: "ok", Value: 0.0}},
	} {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A reply body is exactly its declared length: the wire layer cuts
		// it out of the message by that length before validating it.
		reply := bson.Raw(data)
		if len(data) < 5 || int(binary.LittleEndian.Uint32(data)) != len(data) || reply.Validate() != nil {
			return
		}
		err := FromReply(reply)
		ok, hasOK := reply.Lookup("ok").AsFloat64OK()
		if !hasOK || ok != 1 {
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("%v: ok %v (%v) gave %T %v, want a *CommandError", reply, ok, hasOK, err, err)
			}
			if reply.Lookup("ok").Type == 0 {
				return
			}
			if code, _ := reply.Lookup("code").AsInt64OK(); ce.Code != int32(code) {
				t.Fatalf("%v: code %d, want %d", reply, ce.Code, int32(code))
			}
			if msg, _ := reply.Lookup("errmsg").StringValueOK(); ce.Message != msg {
				t.Fatalf("%v: message %q, want %q", reply, ce.Message, msg)
			}
			if name, _ := reply.Lookup("codeName").StringValueOK(); ce.Name != name {
				t.Fatalf("%v: codeName %q, want %q", reply, ce.Name, name)
			}
			return
		}
		writeErrors := 0
		if arr, isArr := reply.Lookup("writeErrors").ArrayOK(); isArr {
			vals, _ := arr.Values()
			for _, v := range vals {
				if _, isDoc := v.DocumentOK(); isDoc {
					writeErrors++
				}
			}
		}
		_, hasWCE := reply.Lookup("writeConcernError").DocumentOK()
		var wex *WriteException
		switch {
		case writeErrors == 0 && !hasWCE:
			if err != nil {
				t.Fatalf("%v: a successful reply gave %T %v", reply, err, err)
			}
		case !errors.As(err, &wex):
			t.Fatalf("%v: gave %T %v, want a *WriteException", reply, err, err)
		case len(wex.WriteErrors) != writeErrors:
			t.Fatalf("%v: %d write errors, want %d", reply, len(wex.WriteErrors), writeErrors)
		case (wex.WriteConcernError != nil) != hasWCE:
			t.Fatalf("%v: writeConcernError %v, want one: %v", reply, wex.WriteConcernError, hasWCE)
		}
	})
}
