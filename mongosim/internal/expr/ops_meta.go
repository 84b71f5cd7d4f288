package expr

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// TextScoreField is the field in which a document carries its textScore
// metadata (see query.TextScoreField): a name no BSON document can have.
const TextScoreField = "\x00textScore"

// metaNames are the $meta arguments mongod knows; only textScore is
// implemented.
var metaNames = map[string]bool{
	"textScore": true, "randVal": true, "searchScore": true, "searchHighlights": true,
	"geoNearDistance": true, "geoNearPoint": true, "recordId": true, "indexKey": true,
	"sortKey": true, "searchScoreDetails": true, "searchSequenceToken": true,
	"vectorSearchScore": true, "score": true, "scoreDetails": true,
}

func init() {
	operators["$meta"] = compileMeta
}

// ErrNoTextScore is mongod's error for {$meta: "textScore"} where no $text
// query computed one.
func ErrNoTextScore() error {
	return cmderr.New(40218, "query requires text score metadata, but it is not available")
}

// CheckMeta validates a $meta argument as mongod does: textScore is
// supported, the other metadata mongod has is NotImplemented, anything
// else is 17308.
func CheckMeta(arg any) error {
	s, ok := arg.(string)
	if !ok || !metaNames[s] {
		return cmderr.New(17308, "Unsupported argument to $meta: %s", metaArgString(arg))
	}
	if s != "textScore" {
		return cmderr.Unsupported("$meta \"" + s + "\"")
	}
	return nil
}

func metaArgString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return value.TypeName(v)
}

func compileMeta(_ string, arg any) (evalFn, error) {
	if err := CheckMeta(arg); err != nil {
		return nil, err
	}
	return func(s *scope) (any, error) { return TextScore(s.root) }, nil
}

// TextScore returns the textScore a document carries.
func TextScore(d bson.D) (float64, error) {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i].Key == TextScoreField {
			f, _ := d[i].Value.(float64)
			return f, nil
		}
	}
	return 0, ErrNoTextScore()
}

// StripTextScore removes the textScore from d and from the documents
// nested in it ($push of $$ROOT, $facet), in place.
func StripTextScore(d bson.D) bson.D {
	out := d[:0]
	for _, e := range d {
		if e.Key == TextScoreField {
			continue
		}
		e.Value = stripTextScoreValue(e.Value)
		out = append(out, e)
	}
	return out
}

func stripTextScoreValue(v any) any {
	switch x := v.(type) {
	case bson.D:
		return StripTextScore(x)
	case bson.A:
		for i := range x {
			x[i] = stripTextScoreValue(x[i])
		}
	}
	return v
}
