package agg

import "testing"

func TestRedact(t *testing.T) {
	runPipeCases(t, []pipeCase{
		{name: "descend prunes embedded documents", input: `[{"_id": 1, "level": 1, "sub": {"level": 3, "x": 1}, "list": [{"level": 1, "y": 2}, {"level": 5, "y": 3}, 7, [{"level": 9}]]}, {"_id": 2, "level": 5}]`,
			pipeline: `[{"$redact": {"$cond": [{"$lte": ["$level", 2]}, "$$DESCEND", "$$PRUNE"]}}]`,
			want:     `[{"_id": 1, "level": 1, "list": [{"level": 1, "y": 2}, 7, []]}]`},
		{name: "keep stops descending", input: `[{"_id": 1, "sub": {"level": 9}}]`,
			pipeline: `[{"$redact": "$$KEEP"}]`,
			want:     `[{"_id": 1, "sub": {"level": 9}}]`},
		{name: "redact must answer a redact variable", input: `[{"_id": 1}]`, pipeline: `[{"$redact": 1}]`, code: 17053},
	})
}
