package query

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// pathSpec is a dotted field path split once at compile time.
type pathSpec struct {
	path  string
	parts []string
	// index[i] is parts[i] as an array index, or -1 when it is not numeric.
	index []int
	// noExpand: the value-form $elemMatch case, where leaves see the element
	// itself and never its array elements.
	noExpand bool
}

func newPath(path string, ctx compileCtx) pathSpec {
	p := pathSpec{path: path, noExpand: ctx.valueForm}
	if ctx.valueForm {
		return p
	}
	if !strings.Contains(path, ".") {
		// One field, the usual case: one allocation for both slices.
		one := &struct {
			parts [1]string
			index [1]int
		}{parts: [1]string{path}, index: [1]int{arrayIndex(path)}}
		p.parts, p.index = one.parts[:], one.index[:]
		return p
	}
	p.parts = strings.Split(path, ".")
	p.index = make([]int, len(p.parts))
	for i, s := range p.parts {
		p.index[i] = arrayIndex(s)
	}
	return p
}

// arrayIndex returns s as a non-negative array index, or -1.
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 {
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
	}
	n, _ := strconv.Atoi(s)
	return n
}

// with returns the path predicate applying l to the values at the path,
// including each element of an array found at the end of the path.
func (p pathSpec) with(l leaf) *pathNode {
	return &pathNode{pathSpec: p, leaf: l, expand: !p.noExpand}
}

// eqNode is the pathNode of an equality on one field, the commonest
// predicate ({_id: v}), with its leaf and its path's parts: one allocation
// instead of three.
type eqNode struct {
	pathNode
	eq    eqLeaf
	parts [1]string
	index [1]int
}

// newEqNode is newPath(path, ctx).with(newEqLeaf(v, ctx.coll)).
func newEqNode(path string, v any, ctx compileCtx) *pathNode {
	if ctx.valueForm || isNull(v) || strings.Contains(path, ".") {
		return newPath(path, ctx).with(newEqLeaf(v, ctx.coll))
	}
	n := &eqNode{eq: eqLeaf{v: v, coll: ctx.coll}, parts: [1]string{path}, index: [1]int{arrayIndex(path)}}
	n.pathNode = pathNode{pathSpec: pathSpec{path: path, parts: n.parts[:], index: n.index[:]}, leaf: &n.eq, expand: true}
	return &n.pathNode
}

// withNoExpand is with for leaves that look at an array as a whole ($size,
// $elemMatch).
func (p pathSpec) withNoExpand(l leaf) *pathNode {
	return &pathNode{pathSpec: p, leaf: l}
}

// pathNode applies a leaf predicate to every value a dotted path reaches,
// with MongoDB's implicit array traversal: it matches when any reached value
// matches.
type pathNode struct {
	pathSpec
	leaf   leaf
	expand bool
}

func (p *pathNode) match(v any, pos *int) bool {
	return p.walk(v, 0, -1, pos)
}

func (p *pathNode) matchDoc(d bson.D, pos *int) bool {
	if len(p.parts) == 0 {
		return p.walk(d, 0, -1, pos)
	}
	return p.walkDoc(d, 0, -1, pos)
}

func (p *pathNode) walkDoc(x bson.D, i int, idx int, pos *int) bool {
	for _, e := range x {
		if e.Key == p.parts[i] {
			return p.walk(e.Value, i+1, idx, pos)
		}
	}
	return p.atLeaf(missing, idx, pos)
}

// walk follows parts[i:] from v. idx is the index taken in the first array
// traversed so far (-1 if none), recorded into pos when the leaf matches.
func (p *pathNode) walk(v any, i int, idx int, pos *int) bool {
	if i == len(p.parts) {
		return p.atLeaf(v, idx, pos)
	}
	switch x := v.(type) {
	case bson.D:
		return p.walkDoc(x, i, idx, pos)
	case bson.M:
		child, ok := x[p.parts[i]]
		if !ok {
			return p.atLeaf(missing, idx, pos)
		}
		return p.walk(child, i+1, idx, pos)
	case bson.A:
		if n := p.index[i]; n >= 0 && n < len(x) {
			if p.walk(x[n], i+1, idx, pos) {
				return true
			}
		}
		// Implicit traversal: only document elements are looked into;
		// scalars (and nested arrays) reach nothing.
		for j, e := range x {
			switch e.(type) {
			case bson.D, bson.M:
				k := idx
				if k < 0 {
					k = j
				}
				if p.walk(e, i, k, pos) {
					return true
				}
			}
		}
		return false
	}
	return p.atLeaf(missing, idx, pos)
}

func (p *pathNode) atLeaf(v any, idx int, pos *int) bool {
	if il, ok := p.leaf.(indexedLeaf); ok {
		matched, j := il.matchIndex(v)
		if matched {
			if idx < 0 {
				idx = j
			}
			record(pos, idx)
		}
		return matched
	}
	if p.expand {
		if arr, ok := v.(bson.A); ok {
			for j, e := range arr {
				if p.leaf.matches(e) {
					if idx < 0 {
						idx = j
					}
					record(pos, idx)
					return true
				}
			}
		}
	}
	if p.leaf.matches(v) {
		record(pos, idx)
		return true
	}
	return false
}

func record(pos *int, idx int) {
	if pos != nil && *pos < 0 {
		*pos = idx
	}
}

// Lookup returns the value at a dotted path: nested documents by field name
// and arrays by numeric component ("pending.0"). It does not traverse arrays
// implicitly.
func Lookup(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for {
		part, rest, more := strings.Cut(path, ".")
		switch x := cur.(type) {
		case bson.D:
			found := false
			for _, e := range x {
				if e.Key == part {
					cur, found = e.Value, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case bson.M:
			v, ok := x[part]
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			n := arrayIndex(part)
			if n < 0 || n >= len(x) {
				return nil, false
			}
			cur = x[n]
		default:
			return nil, false
		}
		if !more {
			return cur, true
		}
		path = rest
	}
}
