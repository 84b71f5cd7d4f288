package soak

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy"
)

// The transaction workload (Options.Transactions): worker g's k-th
// transaction increments the worker's balance documents "a/bal/<g>" and
// "b/bal/<g>" and inserts the markers "a/t/<g>/<k>" and "b/t/<g>/<k>", all
// in the collection "txn", each document's half in its field h. On a
// sharded cluster that collection is sharded on h and split at "b", the two
// halves on two shards, so every transaction commits on two shards. Afterwards both markers of a
// transaction exist or neither does (one alone is a half-committed
// transaction), a successful transaction's markers exist, and each balance
// equals its markers.

const txnColl = "txn"

// Transactor is a Client that runs transactions.
type Transactor interface {
	// Transaction runs fn in a transaction with the driver's convenient
	// API (which retries it as the Transactions specification says) and
	// commits it.
	Transaction(ctx context.Context, fn func(ctx context.Context, w TxnWriter) error) error
}

// TxnWriter writes inside a transaction.
type TxnWriter interface {
	Insert(ctx context.Context, db, coll string, doc bson.D) error
	// Inc adds 1 to field n of the document filter matches, creating it.
	Inc(ctx context.Context, db, coll string, filter bson.D) error
}

func txnMarker(half string, g, k int) string { return fmt.Sprintf("%s/t/%d/%d", half, g, k) }
func txnBalance(half string, g int) string   { return fmt.Sprintf("%s/bal/%d", half, g) }

// transaction runs worker w's next transaction.
func (w *worker) transaction(ctx context.Context, t Transactor, db string) error {
	k := len(w.txns)
	return t.Transaction(ctx, func(ctx context.Context, tw TxnWriter) error {
		for _, half := range []string{"a", "b"} {
			if err := tw.Inc(ctx, db, txnColl, bson.D{{Key: "h", Value: half}, {Key: "_id", Value: txnBalance(half, w.g)}}); err != nil {
				return err
			}
			if err := tw.Insert(ctx, db, txnColl, bson.D{{Key: "_id", Value: txnMarker(half, w.g, k)}, {Key: "h", Value: half}}); err != nil {
				return err
			}
		}
		return nil
	})
}

// shardTxnCollection shards the transactions' collection on h with the
// "a" and "b" halves on two shards, when db's deployment is a sharded
// cluster of two or more shards; elsewhere it does nothing.
func shardTxnCollection(ctx context.Context, admin *sturdy.Client, db string) (sharded bool, err error) {
	var shards struct {
		Shards []struct {
			ID string `bson:"_id"`
		} `bson:"shards"`
	}
	reply, err := admin.Database("admin").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}})
	if err != nil || bson.Unmarshal(reply, &shards) != nil || len(shards.Shards) < 2 {
		return false, nil // not a sharded cluster of several shards
	}
	ns := db + "." + txnColl
	run := func(cmd bson.D) error {
		_, err := admin.Database("admin").RunCommand(ctx, cmd)
		if err != nil {
			return fmt.Errorf("soak: %s: %w", cmd[0].Key, err)
		}
		return nil
	}
	if err := run(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "h", Value: 1}}}}); err != nil {
		return false, err
	}
	if err := run(bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "h", Value: "b"}}}}); err != nil {
		return false, err
	}
	// The whole collection starts on the database's primary shard: the
	// "b" half moves to another one.
	var dbDoc struct {
		Primary string `bson:"primary"`
	}
	if err := admin.Database("config").Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: db}}).Decode(&dbDoc); err != nil {
		return false, fmt.Errorf("soak: the primary shard of %s: %w", db, err)
	}
	to := shards.Shards[0].ID
	if to == dbDoc.Primary {
		to = shards.Shards[1].ID
	}
	return true, run(bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "h", Value: "b"}}}, {Key: "to", Value: to}})
}

// checkTransactions reads the transactions' collection back.
func (r *Report) checkTransactions(ctx context.Context, coll *sturdy.Collection, workers []*worker) error {
	markers := map[string][]bitset{"a": make([]bitset, len(workers)), "b": make([]bitset, len(workers))}
	balances := map[string][]int64{"a": make([]int64, len(workers)), "b": make([]int64, len(workers))}
	for g, w := range workers {
		markers["a"][g], markers["b"][g] = newBitset(len(w.txns)), newBitset(len(w.txns))
	}
	var lost, dup, failedApplied, half int64
	err := eachDoc(ctx, coll, nil, func(raw bson.Raw) error {
		id, _ := raw.Lookup("_id").StringValueOK()
		if len(id) < 2 || (id[0] != 'a' && id[0] != 'b') || id[1] != '/' {
			return nil
		}
		h, rest := id[:1], id[1:]
		if g, k, ok := parsePair(rest, "/t/", "/"); ok && g < len(workers) {
			if markers[h][g].set(k) {
				dup++ // cannot happen with a unique _id; counted if it does
			}
		} else if g, ok := parseOne(rest, "/bal/"); ok && g < len(workers) {
			balances[h][g] = int64Value(raw.Lookup("n"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for g, w := range workers {
		counted := map[string]int64{}
		for k := range w.txns {
			a, b := markers["a"][g].has(k), markers["b"][g].has(k)
			if a {
				counted["a"]++
			}
			if b {
				counted["b"]++
			}
			switch st := w.txns.status(k); {
			case a != b:
				half++
			case st == stOK && !a:
				lost++
			case st == stFailed && a:
				failedApplied++
			}
		}
		// A balance counts its half's committed transactions: more is an
		// increment applied twice, less one applied without its marker.
		for _, h := range []string{"a", "b"} {
			if d := balances[h][g] - counted[h]; d > 0 {
				dup += d
			} else {
				half -= d
			}
		}
	}
	r.HalfCommitted += half
	r.add(kindTransaction, failedApplied, lost, dup)
	return nil
}

// parseOne parses prefix + a non-negative integer.
func parseOne(s, prefix string) (int, bool) {
	a, _, ok := parsePair(s+"/0", prefix, "/")
	return a, ok
}

// sturdyTransactor runs transactions with sturdy's WithTransaction.
func (s sturdyClient) Transaction(ctx context.Context, fn func(ctx context.Context, w TxnWriter) error) error {
	sess, err := s.c.StartSession(ctx)
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	return sess.WithTransaction(ctx, func(ctx context.Context) error {
		return fn(ctx, sturdyTxnWriter{c: s.c, s: sess})
	}, nil)
}

type sturdyTxnWriter struct {
	c *sturdy.Client
	s *sturdy.Session
}

func (w sturdyTxnWriter) Insert(ctx context.Context, db, coll string, doc bson.D) error {
	_, err := w.c.Database(db).Collection(coll).InsertOne(ctx, doc, &sturdy.InsertOneOptions{Session: w.s})
	return err
}

func (w sturdyTxnWriter) Inc(ctx context.Context, db, coll string, filter bson.D) error {
	_, err := w.c.Database(db).Collection(coll).UpdateOne(ctx, filter,
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}}, &sturdy.UpdateOptions{Upsert: true, Session: w.s})
	return err
}

// errNoTransactions: the driver's client cannot run transactions.
var errNoTransactions = errors.New("soak: the driver's client does not run transactions (it is no soak.Transactor)")
