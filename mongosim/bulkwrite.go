package mongosim

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

func init() {
	register(&command{name: "bulkWrite", run: cmdBulkWrite, write: true, retryableWrite: true})
}

// bulkOp is one parsed operation of the 8.0 bulkWrite command.
type bulkOp struct {
	kind     string // "insert", "update", "delete"
	db, coll string
	doc      bson.D      // insert
	upd      *updateStmt // update
	del      *deleteStmt // delete
}

// bulkNamespace is one nsInfo entry; ops refer to it by index.
type bulkNamespace struct{ db, coll string }

// bulkCounts are the reply's totals over the statements that succeeded.
type bulkCounts struct {
	nErrors, nInserted, nMatched, nModified, nUpserted, nDeleted int32
}

func cmdBulkWrite(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "bulkWrite may only be run against the admin database.")
	}
	if err := checkFields(r, "ops", "nsInfo", "ordered", "bypassDocumentValidation", "bypassEmptyTsReplacement", "errorsOnly", "let", "cursor", "rawData"); err != nil {
		return nil, err
	}
	vars, err := r.letVars()
	if err != nil {
		return nil, err
	}
	bypassArg(r)
	if v, ok := r.get("rawData"); ok && truthy(v) {
		return nil, cmderr.Unsupported("rawData")
	}
	nss, err := parseBulkNsInfo(r)
	if err != nil {
		return nil, err
	}
	opsList, err := statementsArg(r, "ops")
	if err != nil {
		return nil, err
	}
	ops := make([]*bulkOp, len(opsList))
	for i, v := range opsList {
		if ops[i], err = parseBulkOp(i, v, nss); err != nil {
			return nil, err
		}
	}
	ordered := orderedArg(r)
	errorsOnly := false
	if v, ok := r.get("errorsOnly"); ok {
		errorsOnly = truthy(v)
	}
	batchSize, err := cursorBatchSize(r)
	if err != nil {
		return nil, err
	}
	if batchSize < 0 {
		batchSize = math.MaxInt32
	}

	s := r.data()
	var counts bulkCounts
	var results []bson.D
	for i, op := range ops {
		res, err := r.stmt(i, func() (stmtResult, error) { return runBulkOp(r, s, op, vars) })
		if err != nil {
			counts.nErrors++
			results = append(results, bulkErrorItem(i, err))
			if ordered {
				break
			}
			continue
		}
		item := counts.add(i, op.kind, res)
		if !errorsOnly {
			results = append(results, item)
		}
	}
	reply := s.cursors.reply(r, "admin.$cmd.bulkWrite", results, batchSize, false, endAtOnce)
	return append(reply,
		bson.E{Key: "nErrors", Value: counts.nErrors},
		bson.E{Key: "nInserted", Value: counts.nInserted},
		bson.E{Key: "nMatched", Value: counts.nMatched},
		bson.E{Key: "nModified", Value: counts.nModified},
		bson.E{Key: "nUpserted", Value: counts.nUpserted},
		bson.E{Key: "nDeleted", Value: counts.nDeleted},
	), nil
}

// parseBulkNsInfo parses nsInfo, the namespaces the ops write to.
func parseBulkNsInfo(r *request) ([]bulkNamespace, error) {
	nsv, _ := r.get("nsInfo")
	nsList, ok := nsv.(bson.A)
	if !ok || len(nsList) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "BSON field 'bulkWrite.nsInfo' must be a non-empty array")
	}
	nss := make([]bulkNamespace, len(nsList))
	for i, v := range nsList {
		d, _ := v.(bson.D)
		var ns string
		for _, e := range d {
			switch e.Key {
			case "ns":
				ns, _ = e.Value.(string)
			case "collectionUUID", "encryptionInformation", "isTimeseriesNamespace":
				if e.Key != "collectionUUID" {
					return nil, cmderr.Unsupported("bulkWrite nsInfo." + e.Key)
				}
			default:
				return nil, cmderr.New(40415, "BSON field 'bulkWrite.nsInfo.%s' is an unknown field.", e.Key)
			}
		}
		db, coll, found := strings.Cut(ns, ".")
		if !found {
			return nil, cmderr.New(cmderr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
		}
		if err := validateNamespace(db, coll); err != nil {
			return nil, err
		}
		nss[i] = bulkNamespace{db, coll}
	}
	return nss, nil
}

// parseBulkOp parses ops entry i: {insert|update|delete: <nsInfo index>, ...}.
func parseBulkOp(i int, v any, nss []bulkNamespace) (*bulkOp, error) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 {
		return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops.%d' must be a non-empty object", i)
	}
	op := &bulkOp{kind: d[0].Key}
	idx, ok := int64Arg(d[0].Value)
	if !ok || idx < 0 || idx >= int64(len(nss)) {
		return nil, cmderr.New(cmderr.BadValue, "BulkWrite ops entry %d has an invalid nsInfo index", i)
	}
	op.db, op.coll = nss[idx].db, nss[idx].coll
	rest := d[1:]
	var err error
	switch op.kind {
	case "insert":
		op.doc, err = parseBulkInsert(rest)
	case "update":
		// bulkWrite spells update's c (constants) out in full.
		renamed := make(bson.D, 0, len(rest))
		for _, e := range rest {
			if e.Key == "constants" {
				e.Key = "c"
			}
			renamed = append(renamed, e)
		}
		op.upd = &updateStmt{}
		err = parseUpdateStmt(op.upd, renamed, "bulkWrite.ops", "filter", "updateMods")
	case "delete":
		op.del, err = parseBulkDelete(rest)
	default:
		return nil, cmderr.New(cmderr.FailedToParse, "Unrecognized bulkWrite operation: %s", op.kind)
	}
	if err != nil {
		return nil, err
	}
	return op, nil
}

func parseBulkInsert(rest bson.D) (bson.D, error) {
	var doc bson.D
	for _, e := range rest {
		if e.Key != "document" {
			return nil, cmderr.New(40415, "BSON field 'bulkWrite.ops.%s' is an unknown field.", e.Key)
		}
		var ok bool
		if doc, ok = e.Value.(bson.D); !ok {
			return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops.document' is the wrong type '%s', expected type 'object'", typeNameOf(e.Value))
		}
	}
	if doc == nil {
		return nil, cmderr.New(40414, "BSON field 'bulkWrite.ops.document' is missing but a required field")
	}
	return doc, nil
}

func parseBulkDelete(rest bson.D) (*deleteStmt, error) {
	st := &deleteStmt{}
	have := false
	for _, e := range rest {
		switch e.Key {
		case "filter":
			var ok bool
			if st.filterDoc, ok = e.Value.(bson.D); !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "BSON field 'bulkWrite.ops.filter' is the wrong type '%s', expected type 'object'", typeNameOf(e.Value))
			}
			have = true
		case "multi":
			st.multi = truthy(e.Value)
		case "hint":
			st.hint = e.Value
		case "collation":
			st.collation, st.hasCollation = e.Value, true
		default:
			return nil, cmderr.New(40415, "BSON field 'bulkWrite.ops.%s' is an unknown field.", e.Key)
		}
	}
	if !have {
		return nil, cmderr.New(40414, "BSON field 'bulkWrite.ops.filter' is missing but a required field")
	}
	return st, nil
}

// runBulkOp executes one parsed op against the node's data.
func runBulkOp(r *request, s *storage, op *bulkOp, vars map[string]any) (stmtResult, error) {
	switch op.kind {
	case "insert":
		return s.insertOne(r.ctx, op.db, op.coll, op.doc)
	case "update":
		env, err := r.withStatement(opEnv{vars: vars}, op.db, op.coll, op.upd.collation, op.upd.hasCollation, "bulkWrite.ops.collation")
		if err != nil {
			return stmtResult{}, err
		}
		return s.execUpdate(r.ctx, op.db, op.coll, op.upd, env, r.now)
	default:
		env, err := r.withStatement(opEnv{vars: vars}, op.db, op.coll, op.del.collation, op.del.hasCollation, "bulkWrite.ops.collation")
		if err != nil {
			return stmtResult{}, err
		}
		return s.execDelete(r.ctx, op.db, op.coll, op.del, env)
	}
}

// bulkErrorItem is the reply entry of a failed statement.
func bulkErrorItem(i int, err error) bson.D {
	code, fields := errorFields(err)
	item := bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(i)}}
	item = append(item, fields...)
	item = append(item, bson.E{Key: "codeName", Value: cmderr.Name(code)})
	return append(item, bson.E{Key: "n", Value: int32(0)})
}

// add counts a successful statement and returns its reply entry.
func (c *bulkCounts) add(i int, kind string, res stmtResult) bson.D {
	item := bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(i)}, {Key: "n", Value: res.N}}
	switch kind {
	case "insert":
		c.nInserted += res.N
	case "update":
		item = append(item, bson.E{Key: "nModified", Value: res.NModified})
		if res.Upserted != nil {
			c.nUpserted++
			item = append(item, bson.E{Key: "upserted", Value: bson.D{{Key: "_id", Value: res.Upserted}}})
		} else {
			c.nMatched += res.N
		}
		c.nModified += res.NModified
	case "delete":
		c.nDeleted += res.N
	}
	return item
}
