package agg

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// getPath follows a dotted path through embedded documents only (no array
// traversal), as $unwind does.
func getPath(doc bson.D, parts []string) (any, bool) {
	var cur any = doc
	for _, p := range parts {
		d, ok := value.ToDoc(cur)
		if !ok {
			return nil, false
		}
		found := false
		for _, e := range d {
			if e.Key == p {
				cur, found = e.Value, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}

// setPath returns a copy of doc with the path set to v, copying every
// document along the path so doc itself is never modified. A non-document
// in the way is replaced by a new document.
func setPath(doc bson.D, parts []string, v any) bson.D {
	out := make(bson.D, len(doc), len(doc)+1)
	copy(out, doc)
	for i := range out {
		if out[i].Key == parts[0] {
			if len(parts) == 1 {
				out[i].Value = v
			} else {
				sub, _ := value.ToDoc(out[i].Value)
				out[i].Value = setPath(sub, parts[1:], v)
			}
			return out
		}
	}
	if len(parts) == 1 {
		return append(out, bson.E{Key: parts[0], Value: v})
	}
	return append(out, bson.E{Key: parts[0], Value: setPath(nil, parts[1:], v)})
}

// removePath returns a copy of doc without the path (through documents only).
func removePath(doc bson.D, parts []string) bson.D {
	out := make(bson.D, 0, len(doc))
	for _, e := range doc {
		if e.Key != parts[0] {
			out = append(out, e)
			continue
		}
		if len(parts) == 1 {
			continue
		}
		if sub, ok := value.ToDoc(e.Value); ok {
			e.Value = removePath(sub, parts[1:])
		}
		out = append(out, e)
	}
	return out
}
