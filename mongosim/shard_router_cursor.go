package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// A router's own view of the cursors it relays: which are change streams,
// so that its failGetMoreAfterCursorCheckout fail point labels a resumable
// error ResumableChangeStreamError as mongos does.

// noteStreamCursor records the cursor a $changeStream aggregate opened, and
// forgets one a getMore exhausted or killCursors killed.
func (r *Router) noteStreamCursor(rq *request, reply bson.D) {
	switch rq.name {
	case "aggregate":
		if !isChangeStreamPipeline(rq) {
			return
		}
		if id := replyCursorID(reply); id != 0 {
			r.streams.Store(id, true)
		}
	case "killCursors":
		if v, ok := rq.get("cursors"); ok {
			ids, _ := v.(bson.A)
			for _, id := range ids {
				if n, ok := id.(int64); ok {
					r.streams.Delete(n)
				}
			}
		}
	case "getMore":
		if v, ok := rq.get("getMore"); ok {
			if id, ok := v.(int64); ok && replyOK(reply) && replyCursorID(reply) == 0 {
				r.streams.Delete(id)
			}
		}
	}
}

func isChangeStreamPipeline(rq *request) bool {
	v, _ := rq.get("pipeline")
	p, ok := v.(bson.A)
	if !ok || len(p) == 0 {
		return false
	}
	first, ok := p[0].(bson.D)
	return ok && len(first) > 0 && first[0].Key == "$changeStream"
}

func replyCursorID(reply bson.D) int64 {
	c, _ := lookupD(reply, "cursor")
	d, ok := c.(bson.D)
	if !ok {
		return 0
	}
	id, _ := lookupD(d, "id")
	n, _ := id.(int64)
	return n
}

// failGetMore applies the router's failGetMoreAfterCursorCheckout fail
// point to a getMore; true if it answered.
func (r *Router) failGetMore(rq *request, out *outcome) bool {
	act := r.fails.evaluate(fpFailGetMoreAfterCursorCheckout, r.cluster, func(fp *failPoint) bool { return failPointFilters(fp, rq) })
	if act == nil {
		return false
	}
	code := act.errorCode
	if code == 0 {
		code = codeInternalError
	}
	e := cmderr.New(code, failGetMoreAfterCursorCheckoutMessage)
	v, _ := rq.get("getMore")
	if id, ok := v.(int64); ok && resumableCodes[code] {
		if _, stream := r.streams.Load(id); stream {
			e.Labels = []string{labelResumableChangeStream}
		}
	}
	r.replyErr(rq, out, e)
	return true
}
