package update

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

type opKind int

const (
	opSet opKind = iota
	opUnset
	opInc
	opMul
	opMin
	opMax
	opRename
	opSetOnInsert
	opCurrentDate
	opPush
	opAddToSet
	opPull
	opPullAll
	opPop
	opBit
	opPlaceholder // the source path of a $rename: reserved for conflict detection, applied by the rename leaf
)

var operators = map[string]opKind{
	"$set": opSet, "$unset": opUnset, "$inc": opInc, "$mul": opMul, "$min": opMin, "$max": opMax,
	"$rename": opRename, "$setOnInsert": opSetOnInsert, "$currentDate": opCurrentDate,
	"$push": opPush, "$addToSet": opAddToSet, "$pull": opPull, "$pullAll": opPullAll,
	"$pop": opPop, "$bit": opBit,
}

// leaf is one operator applied at one path.
type leaf struct {
	kind opKind
	op   string // operator name, "$set"
	path string // the path as written in the update
	arg  any    // the operator's argument for this path

	push      *pushSpec
	each      bson.A // $addToSet values
	pull      *pullSpec
	pullAll   bson.A
	popFirst  bool
	bits      []bitOp
	timestamp bool     // $currentDate {$type: "timestamp"}
	from      []string // $rename source path
	fromPath  string
}

// node is one path component of the compiled update tree. An object node's
// children are field names (and "$"); an array node's children are "$[]"
// and "$[<identifier>]", applied to every (matching) array element. A leaf
// node has the operator applied at its path instead of children.
type node struct {
	children []child // in the order the server applies them (fieldOrder)
	array    bool
	leaf     *leaf
}

// child is a node's child under one path component. Children are held by
// value in their parent's slice: a tree costs no allocation per node.
type child struct {
	key  string
	node node
}

// find returns the index of key's child, or where it would be inserted.
func (n *node) find(key string) (int, bool) {
	return slices.BinarySearchFunc(n.children, key, func(c child, k string) int { return fieldOrder(c.key, k) })
}

// lookup returns key's child, nil if there is none. The pointer is valid
// until a child is added to n.
func (n *node) lookup(key string) *node {
	if i, ok := n.find(key); ok {
		return &n.children[i].node
	}
	return nil
}

// add inserts c as key's child, which must not exist, keeping the order.
func (n *node) add(key string, c node) *node {
	i, _ := n.find(key)
	n.children = slices.Insert(n.children, i, child{key: key, node: c})
	return &n.children[i].node
}

// fieldOrder is compareFieldNames made a total order: names it ranks equal
// ("1" and "01") in plain string order, so a child is found by its name.
func fieldOrder(a, b string) int {
	if c := compareFieldNames(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// compareFieldNames orders field names as the server applies them: numeric
// names numerically, everything else lexicographically.
func compareFieldNames(a, b string) int {
	an, bn := isDigits(a), isDigits(b)
	if an && bn {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	}
	return strings.Compare(a, b)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// arrayIndex parses a path component used as an array index.
// Indexes too large for an int are capped: they are past the end of any
// array, where creating operators fail the padding limit.
func arrayIndex(s string) (int, bool) {
	if !isDigits(s) || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return n, true
}

func isArrayFilterComponent(s string) bool {
	return strings.HasPrefix(s, "$[") && strings.HasSuffix(s, "]")
}

// compileOperators builds the tree for an update of $-operators.
func (u *Update) compileOperators(spec bson.D) error {
	for _, mod := range spec {
		if mod.Key == "$" {
			return cmderr.New(cmderr.FailedToParse, "'$' is not a valid update operator")
		}
		kind, ok := operators[mod.Key]
		if !ok {
			return cmderr.New(cmderr.FailedToParse,
				"Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", mod.Key)
		}
		fields, ok := mod.Value.(bson.D)
		if !ok {
			return cmderr.New(cmderr.FailedToParse,
				"Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s}",
				typeName(mod.Value), formatElem(mod.Key, mod.Value))
		}
		for _, f := range fields {
			if err := u.addLeaf(kind, mod.Key, f); err != nil {
				return err
			}
		}
	}
	return nil
}

func typeName(v any) string {
	if v == nil {
		return "null"
	}
	return value.TypeName(v)
}

// parsePath validates an update path the way the server's field checker
// does and returns its components, appended to buf[:0] (a caller's array
// saves allocating them).
func parsePath(path string, buf []string) ([]string, error) {
	if path == "" {
		return nil, cmderr.New(cmderr.EmptyFieldName, "An empty update path is not valid.")
	}
	parts := buf[:0]
	for p := range strings.SplitSeq(path, ".") {
		parts = append(parts, p)
	}
	positional := 0
	for i, p := range parts {
		if p == "" {
			return nil, cmderr.New(cmderr.EmptyFieldName,
				"The update path '%s' contains an empty field name, which is not allowed.", path)
		}
		switch {
		case p == "$":
			positional++
			if i == 0 {
				return nil, cmderr.New(cmderr.BadValue,
					"Cannot have positional (i.e. '$') element in the first position in path '%s'", path)
			}
		case isArrayFilterComponent(p):
			if i == 0 {
				return nil, cmderr.New(cmderr.BadValue,
					"Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", path)
			}
		}
		// Other $-prefixed names are field names (MongoDB 5.0+); a
		// top-level one may only be created by an upsert's insert
		// (Update.topDollar).
	}
	if positional > 1 {
		return nil, cmderr.New(cmderr.BadValue, "Too many positional (i.e. '$') elements found in path '%s'", path)
	}
	return parts, nil
}

func isDynamic(parts []string) bool {
	for _, p := range parts {
		if p == "$" || isArrayFilterComponent(p) {
			return true
		}
	}
	return false
}

func (u *Update) addLeaf(kind opKind, op string, f bson.E) error {
	var buf [8]string
	parts, err := parsePath(f.Key, buf[:])
	if err != nil {
		return err
	}
	l := &leaf{kind: kind, op: op, path: f.Key, arg: f.Value}
	if err := l.init(f); err != nil {
		return err
	}
	if parts[0][0] == '$' && kind != opUnset && kind != opRename {
		u.topDollar = append(u.topDollar, f.Key)
	}
	if kind == opRename {
		to, err := parsePath(f.Value.(string), nil)
		if err != nil {
			return err
		}
		if isDynamic(parts) {
			return cmderr.New(cmderr.BadValue, "The source field for $rename may not be dynamic: %s", f.Key)
		}
		if isDynamic(to) {
			return cmderr.New(cmderr.BadValue, "The destination field for $rename may not be dynamic: %s", f.Value)
		}
		if to[0][0] == '$' {
			u.topDollar = append(u.topDollar, f.Value.(string))
		}
		if isPrefix(parts, to) || isPrefix(to, parts) {
			return cmderr.New(cmderr.BadValue,
				"The source and target field for $rename must not be on the same path: %s", formatElem(f.Key, f.Value))
		}
		l.from, l.fromPath = slices.Clone(parts), f.Key
		l.path = f.Value.(string)
		if err := u.insert(parts, f.Key, &leaf{kind: opPlaceholder, op: op, path: f.Key}); err != nil {
			return err
		}
		parts = to
	}
	return u.insert(parts, l.path, l)
}

func isPrefix(a, b []string) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// insert places l in the tree at parts, reporting a conflict when another
// update already owns the path, one of its prefixes or one of its extensions.
func (u *Update) insert(parts []string, path string, l *leaf) error {
	conflict := func(i int) error {
		return cmderr.New(cmderr.ConflictingUpdateOperators,
			"Updating the path '%s' would create a conflict at '%s'", path, strings.Join(parts[:i+1], "."))
	}
	cur := &u.root
	for i := 0; i < len(parts)-1; i++ {
		if parts[i] == "$" {
			u.positional = true
		}
		u.noteIdentifier(parts[i], path)
		wantArray := isArrayFilterComponent(parts[i+1])
		next := cur.lookup(parts[i])
		switch {
		case next == nil:
			next = cur.add(parts[i], node{array: wantArray})
		case next.leaf != nil, next.array != wantArray:
			return conflict(i)
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if last == "$" {
		u.positional = true
	}
	u.noteIdentifier(last, path)
	if cur.lookup(last) != nil {
		return conflict(len(parts) - 1)
	}
	cur.add(last, node{leaf: l})
	return nil
}

func (u *Update) noteIdentifier(part, path string) {
	if !isArrayFilterComponent(part) || part == "$[]" {
		return
	}
	id := part[2 : len(part)-1]
	if u.identifiers == nil {
		u.identifiers = map[string]string{}
	}
	if _, ok := u.identifiers[id]; !ok {
		u.identifiers[id] = path
	}
}

// init validates the operator's argument, as each server update node does.
func (l *leaf) init(f bson.E) error {
	switch l.kind {
	case opInc, opMul:
		if !value.IsNumber(f.Value) {
			verb := "increment"
			if l.kind == opMul {
				verb = "multiply"
			}
			return cmderr.New(cmderr.TypeMismatch, "Cannot %s with non-numeric argument: {%s}", verb, formatElem(f.Key, f.Value))
		}
	case opRename:
		if _, ok := f.Value.(string); !ok {
			return cmderr.New(cmderr.BadValue, "The 'to' field for $rename must be a string: %s", formatElem(f.Key, f.Value))
		}
		if f.Value.(string) == f.Key {
			return cmderr.New(cmderr.BadValue, "The source and target field for $rename must differ: %s", formatElem(f.Key, f.Value))
		}
	case opCurrentDate:
		return l.initCurrentDate(f)
	case opPush:
		spec, err := parsePush(f.Value)
		if err != nil {
			return err
		}
		l.push = spec
	case opAddToSet:
		return l.initAddToSet(f)
	case opPull:
		spec, err := parsePull(f.Value)
		if err != nil {
			return err
		}
		l.pull = spec
	case opPullAll:
		arr, ok := f.Value.(bson.A)
		if !ok {
			return cmderr.New(cmderr.BadValue, "$pullAll requires an array argument but was given a %s", typeName(f.Value))
		}
		l.pullAll = arr
	case opPop:
		if !value.IsNumber(f.Value) {
			return cmderr.New(cmderr.FailedToParse, "Expected a number in: %s", formatElem(f.Key, f.Value))
		}
		n, _ := value.ToFloat(f.Value)
		if n != 1 && n != -1 {
			return cmderr.New(cmderr.FailedToParse, "$pop expects 1 or -1, found: %s", formatNumber(n))
		}
		l.popFirst = n == -1
	case opBit:
		return l.initBit(f)
	}
	return nil
}

func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (l *leaf) initCurrentDate(f bson.E) error {
	switch v := f.Value.(type) {
	case bool:
		return nil
	case bson.D:
		found := false
		for _, e := range v {
			if e.Key != "$type" {
				return cmderr.New(cmderr.BadValue, "Unrecognized $currentDate option: %s", e.Key)
			}
			switch e.Value {
			case "date":
				found, l.timestamp = true, false
			case "timestamp":
				found, l.timestamp = true, true
			}
		}
		if !found {
			return cmderr.New(cmderr.BadValue,
				"The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
		}
		return nil
	}
	return cmderr.New(cmderr.BadValue,
		"%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).",
		typeName(f.Value))
}

func (l *leaf) initAddToSet(f bson.E) error {
	d, ok := f.Value.(bson.D)
	if !ok || len(d) == 0 || d[0].Key != "$each" {
		l.each = bson.A{f.Value}
		return nil
	}
	if len(d) > 1 {
		return cmderr.New(cmderr.BadValue, "Found unexpected fields after $each in $addToSet: %s", formatValue(d))
	}
	arr, ok := d[0].Value.(bson.A)
	if !ok {
		return cmderr.New(cmderr.BadValue,
			"The argument to $each in $addToSet must be an array but it was of type %s", typeName(d[0].Value))
	}
	l.each = arr
	return nil
}

type bitOp struct {
	op  string // and, or, xor
	arg any    // int32 or int64
}

func (l *leaf) initBit(f bson.E) error {
	d, ok := f.Value.(bson.D)
	if !ok {
		return cmderr.New(cmderr.BadValue,
			"The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}",
			typeName(f.Value))
	}
	if len(d) == 0 {
		return cmderr.New(cmderr.BadValue,
			"You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
	}
	for _, e := range d {
		switch e.Key {
		case "and", "or", "xor":
		default:
			return cmderr.New(cmderr.BadValue,
				"The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s}",
				e.Key, formatElem(e.Key, e.Value))
		}
		switch e.Value.(type) {
		case int32, int64:
		default:
			return cmderr.New(cmderr.BadValue,
				"The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s}",
				typeName(e.Value), formatElem(e.Key, e.Value))
		}
		l.bits = append(l.bits, bitOp{op: e.Key, arg: e.Value})
	}
	return nil
}
