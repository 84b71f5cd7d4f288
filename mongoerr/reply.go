package mongoerr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/rawdoc"
)

// FromReply classifies a server reply: {ok: 0} gives a *CommandError; ok: 1
// with writeErrors or writeConcernError gives a *WriteException; anything
// else gives nil.
func FromReply(reply bson.Raw) error {
	// One walk for the three fields: a lookup that misses (writeErrors,
	// on every successful write) walks the whole reply.
	var top [3]bson.RawValue // ok, writeErrors, writeConcernError
	rawdoc.FirstFields(reply, replyKeys[:], top[:])
	if top[0].Type == 0 {
		return &CommandError{Code: 0, Message: "reply has no ok field", Raw: reply}
	}
	if f, isNum := top[0].AsFloat64OK(); !isNum || f != 1 {
		ce := &CommandError{Raw: reply, Labels: labels(reply)}
		ce.Code = int32Of(reply, "code")
		ce.Name = stringOf(reply, "codeName")
		ce.Message = stringOf(reply, "errmsg")
		return ce
	}
	var wex *WriteException
	if v := top[1]; v.Type != 0 {
		if arr, ok := v.ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, item := range vals {
				doc, ok := item.DocumentOK()
				if !ok {
					continue
				}
				if wex == nil {
					wex = &WriteException{Raw: reply}
				}
				we := WriteError{Index: int(int32Of(doc, "index")), Code: int32Of(doc, "code"), Message: stringOf(doc, "errmsg"), Raw: doc}
				if d, err := doc.LookupErr("errInfo"); err == nil {
					we.Details, _ = d.DocumentOK()
				}
				wex.WriteErrors = append(wex.WriteErrors, we)
			}
		}
	}
	if v := top[2]; v.Type != 0 {
		if doc, ok := v.DocumentOK(); ok {
			if wex == nil {
				wex = &WriteException{Raw: reply}
			}
			wce := &WriteConcernError{Code: int32Of(doc, "code"), Name: stringOf(doc, "codeName"), Message: stringOf(doc, "errmsg"), Raw: doc}
			if d, err := doc.LookupErr("errInfo"); err == nil {
				wce.Details, _ = d.DocumentOK()
			}
			wex.WriteConcernError = wce
			// Servers before 4.4 put labels inside the writeConcernError.
			wex.Labels = append(wex.Labels, labels(doc)...)
		}
	}
	if wex != nil {
		wex.Labels = append(wex.Labels, labels(reply)...)
		return wex
	}
	return nil
}

// replyKeys are the top-level fields of a reply FromReply reads, in the
// order of its top array.
var replyKeys = [...]string{"ok", "writeErrors", "writeConcernError"}

func labels(doc bson.Raw) []string {
	v, err := doc.LookupErr("errorLabels")
	if err != nil {
		return nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]string, 0, len(vals))
	for _, l := range vals {
		if s, ok := l.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

func int32Of(doc bson.Raw, key string) int32 {
	v, err := doc.LookupErr(key)
	if err != nil {
		return 0
	}
	n, _ := v.AsInt64OK()
	return int32(n)
}

func stringOf(doc bson.Raw, key string) string {
	v, err := doc.LookupErr(key)
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}
