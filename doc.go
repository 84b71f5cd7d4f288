// Package sturdy is a MongoDB client built for writes that must neither be
// lost nor applied twice: every command runs through one execution path
// that attaches sessions and transaction numbers, retries retryable writes
// and reads, and backs off when the server reports overload.
//
// The API reads like the official Go driver's, with plain option structs
// whose zero value is the default:
//
//	client, err := sturdy.Connect(ctx, "mongodb://localhost:27017/?replicaSet=rs0")
//	if err != nil {
//		return err
//	}
//	defer client.Disconnect(context.Background())
//
//	coll := client.Database("shop").Collection("orders")
//	res, err := coll.InsertOne(ctx, bson.D{{Key: "item", Value: "tea"}, {Key: "qty", Value: 2}}, nil)
//	if err != nil {
//		return err
//	}
//	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: res.InsertedID}},
//		bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: 1}}}}, &sturdy.UpdateOptions{Upsert: true})
//
//	cur, err := coll.Find(ctx, bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}},
//		&sturdy.FindOptions{Sort: bson.D{{Key: "qty", Value: -1}}, Limit: 10})
//	if err != nil {
//		return err
//	}
//	defer cur.Close(ctx)
//	for cur.Next(ctx) {
//		var order struct{ Item string; Qty int }
//		if err := cur.Decode(&order); err != nil {
//			return err
//		}
//	}
//	return cur.Err()
//
// Documents and filters are anything bson.Marshal accepts (bson.D, bson.M,
// bson.Raw, tagged structs). Errors are typed and work with errors.As:
// *CommandError, *WriteException, *BulkWriteException,
// *ClientBulkWriteException, *NetworkError,
// *ServerSelectionError; HasErrorLabel, IsDuplicateKey, IsNetworkError and
// IsTimeout classify them. Every blocking call takes a context, and no
// goroutine outlives Client.Disconnect.
package sturdy
