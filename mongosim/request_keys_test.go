package mongosim

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestGetWithKeyFilterMatchesWalk: get answers as a walk of the command
// does, for present and absent keys, with the filter made at decode and
// after cmd is replaced or grown (then the filter is not used).
func TestGetWithKeyFilterMatchesWalk(t *testing.T) {
	walk := func(cmd bson.D, key string) (any, bool) {
		for _, e := range cmd {
			if e.Key == key {
				return e.Value, true
			}
		}
		return nil, false
	}
	keys := []string{"", "find", "filter", "limit", "singleBatch", "lsid", "$clusterTime", "$db", "txnNumber", "autocommit",
		"startTransaction", "maxTimeMS", "readConcern", "writeConcern", "let", "collation", "comment", "updates", "ordered",
		"stmtIds", "hint", "sort", "projection", "skip", "batchSize", "tailable", "awaitData", "x", "a.b", "$where"}
	cmds := []bson.D{
		{},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}, {Key: "limit", Value: int64(1)}, {Key: "singleBatch", Value: true},
			{Key: "lsid", Value: bson.D{}}, {Key: "$clusterTime", Value: bson.D{}}, {Key: "$db", Value: "db"}},
		{{Key: "update", Value: "c"}, {Key: "ordered", Value: true}, {Key: "txnNumber", Value: int64(1)}, {Key: "", Value: 1}, {Key: "updates", Value: bson.A{}}},
	}
	for _, k := range keys {
		cmds = append(cmds, bson.D{{Key: k, Value: int32(len(k))}})
	}
	for _, cmd := range cmds {
		r := &request{cmd: cmd, keys: newCmdKeys(cmd)}
		check := func(when string) {
			t.Helper()
			for _, k := range keys {
				v, ok := r.get(k)
				wv, wok := walk(r.cmd, k)
				if ok != wok || v != nil && fmt.Sprint(v) != fmt.Sprint(wv) {
					t.Errorf("%s %v: get(%q) = %v, %v; walk %v, %v", when, r.cmd, k, v, ok, wv, wok)
				}
			}
		}
		check("decoded")
		r.cmd = append(r.cmd, bson.E{Key: "maxTimeMS", Value: int32(5)}) // grown: a new slice or a longer one
		check("grown")
		r.cmd = bson.D{{Key: "comment", Value: "other"}, {Key: "hint", Value: "x"}}
		check("replaced")
	}
}
