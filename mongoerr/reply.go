package mongoerr

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FromReply classifies a server reply: {ok: 0} gives a *CommandError; ok: 1
// with writeErrors or writeConcernError gives a *WriteException; anything
// else gives nil.
func FromReply(reply bson.Raw) error {
	top := scanReply(reply)
	if top.ok.Type == 0 {
		return &CommandError{Code: 0, Message: "reply has no ok field", Raw: reply}
	}
	if f, isNum := top.ok.AsFloat64OK(); !isNum || f != 1 {
		ce := &CommandError{Raw: reply, Labels: labels(reply)}
		ce.Code = int32Of(reply, "code")
		ce.Name = stringOf(reply, "codeName")
		ce.Message = stringOf(reply, "errmsg")
		return ce
	}
	var wex *WriteException
	if v := top.writeErrors; v.Type != 0 {
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
	if v := top.writeConcernError; v.Type != 0 {
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

// replyFields are the top-level fields of a reply FromReply reads (Type 0:
// absent).
type replyFields struct {
	ok, writeErrors, writeConcernError bson.RawValue
}

// scanReply finds FromReply's fields in one pass over the reply, as
// LookupErr would each (the first of a key; none past a malformed
// element): a successful reply has neither writeErrors nor
// writeConcernError, and a lookup that misses walks every field.
func scanReply(reply bson.Raw) replyFields {
	var f replyFields
	length, rem, ok := bsoncore.ReadLength(reply)
	if !ok || length < 5 || int(length) > len(reply) {
		return f
	}
	rem = rem[:length-5] // the elements, without the terminating 0
	for len(rem) > 0 {
		elem, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			return f
		}
		rem = next
		var dst *bson.RawValue
		switch string(elem.KeyBytes()) {
		case "ok":
			dst = &f.ok
		case "writeErrors":
			dst = &f.writeErrors
		case "writeConcernError":
			dst = &f.writeConcernError
		default:
			continue
		}
		if dst.Type == 0 {
			v, err := elem.ValueErr()
			if err != nil {
				return f
			}
			*dst = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
		}
	}
	return f
}

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
