package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Updates that change a document's shard key, as mongod 4.2+ and mongos
// handle them. A shard never changes a key value in place: its update
// answers WouldChangeOwningShard with the document before and after, and
// the router decides (shard_keychange_router.go): a multi update fails
// with 72 InvalidOptions, an update that is neither a retryable write nor
// in a transaction with 20 IllegalOperation, and otherwise the router
// moves the document: it deletes the old one and inserts the new one on
// the shard its new key targets, in one transaction.

// codeWouldChangeOwningShard is mongod's answer to an update whose new
// shard key value belongs elsewhere.
const codeWouldChangeOwningShard = 283

// keyChangeError is a shard's refusal to change a shard key in place.
type keyChangeError struct {
	pre, post bson.D
}

func (e *keyChangeError) Error() string {
	return "This update would cause the doc to change owning shards"
}

// fields renders the error as a writeErrors entry or error reply holds
// it: the images in errInfo.
func (e *keyChangeError) fields() bson.D {
	return bson.D{
		{Key: "code", Value: int32(codeWouldChangeOwningShard)},
		{Key: "errmsg", Value: e.Error()},
		{Key: "errInfo", Value: bson.D{{Key: "preImage", Value: e.pre}, {Key: "postImage", Value: e.post}, {Key: "shouldUpsert", Value: false}}},
	}
}
