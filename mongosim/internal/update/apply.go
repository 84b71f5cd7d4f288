package update

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// applier carries the state of one application of an operator update.
type applier struct {
	env     Env
	now     time.Time
	orig    bson.D // the document before the update: $rename reads its sources here
	filters map[string]*query.Filter
	renamed [][]string // $rename sources to remove once the tree is applied
}

// idDesc renders the document's _id for error messages: "_id: 1".
func (a *applier) idDesc() string { return idDesc(a.orig) }

// slot is one position in the document an update node applies to.
type slot struct {
	val    any
	exists bool
	// parent and name are the slot's concrete path, for error messages:
	// the enclosing slot's path and the slot's own name ("" at the root).
	parent []string
	name   string
	// block is set when the slot is missing and cannot be created because a
	// non-container value is in the way.
	block *blocker
	// arrayField is the name of the nearest enclosing array, "" if none:
	// $rename refuses to write into arrays.
	arrayField string
}

type blocker struct{ field, elem string }

// maxPadding is how many nulls the server will pad an array with when a
// path sets an index past its end.
const maxPadding = 1500000

const codeCannotBackfillArray = 34

// dotted is the slot's path as written in messages: "a.0.b".
func (s slot) dotted() string { return s.pathTo("") }

// pathTo is the dotted path of s's child key; "" is s's own.
func (s slot) pathTo(key string) string {
	parts := slices.Clip(s.parent)
	if s.name != "" {
		parts = append(parts, s.name)
	}
	if key != "" {
		parts = append(parts, key)
	}
	return strings.Join(parts, ".")
}

// child is the slot of s's child key. The parent path is appended in
// place, so the children of one slot share an array (and a slot of the
// top level needs none): the tree is applied depth first, and a slot's
// path is only read while its node is being applied.
func (s slot) child(key string) slot {
	parent := s.parent
	if s.name != "" {
		parent = append(parent, s.name)
	}
	return slot{parent: parent, name: key, block: s.block, arrayField: s.arrayField}
}

// creatable reports the PathNotViable error of a slot that cannot be created.
func (s slot) creatable() error {
	if s.block != nil {
		return cmderr.New(cmderr.PathNotViable, "Cannot create field '%s' in element {%s}", s.block.field, s.block.elem)
	}
	return nil
}

func (a *applier) applyNode(n *node, s slot) (any, bool, error) {
	switch {
	case n.leaf != nil:
		return a.applyLeaf(n.leaf, s)
	case n.array:
		return a.applyArrayNode(n, s)
	}
	return a.applyObjectNode(n, s)
}

// resolveChildren returns n's children with "$" replaced by the matched
// array position (merged with that position's own child, if any).
func (a *applier) resolveChildren(n *node, s slot) ([]child, error) {
	at, hasPositional := n.find("$")
	if !hasPositional {
		return n.children, nil
	}
	positional := &n.children[at].node
	out := make([]child, 0, len(n.children))
	out = append(out, n.children[:at]...)
	out = append(out, n.children[at+1:]...)
	if a.env.Position < 0 {
		return nil, cmderr.New(cmderr.BadValue, "The positional operator did not find the match needed from the query.")
	}
	key := strconv.Itoa(a.env.Position)
	for i := range out {
		if out[i].key == key {
			merged, err := mergeNodes(&out[i].node, positional, s.pathTo(key))
			if err != nil {
				return nil, err
			}
			out[i].node = *merged
			return out, nil
		}
	}
	out = append(out, child{key, *positional})
	slices.SortFunc(out, func(x, y child) int { return fieldOrder(x.key, y.key) })
	return out, nil
}

// mergeNodes combines two subtrees that apply to the same element (a
// positional update and a concrete one, or two matching array filters).
func mergeNodes(x, y *node, path string) (*node, error) {
	if x.leaf != nil || y.leaf != nil || x.array != y.array {
		return nil, cmderr.New(cmderr.ConflictingUpdateOperators, "Update created a conflict at '%s'", path)
	}
	out := &node{array: x.array, children: slices.Clone(x.children)}
	for i := range y.children {
		c := &y.children[i]
		prev := out.lookup(c.key)
		if prev == nil {
			out.add(c.key, c.node)
			continue
		}
		merged, err := mergeNodes(prev, &c.node, path+"."+c.key)
		if err != nil {
			return nil, err
		}
		*prev = *merged
	}
	return out, nil
}

// applyObjectNode applies n's children by field name (or array index) to
// what the slot holds: nothing, a document, an array or a scalar.
func (a *applier) applyObjectNode(n *node, s slot) (any, bool, error) {
	children, err := a.resolveChildren(n, s)
	if err != nil {
		return nil, false, err
	}
	if !s.exists {
		return a.createDoc(children, s)
	}
	switch cur := s.val.(type) {
	case bson.D:
		d, err := a.applyToDoc(children, s, cur)
		if err != nil {
			return nil, false, err
		}
		return d, true, nil
	case bson.A:
		return a.applyToArray(children, s, cur)
	}
	// A scalar is in the way of every child.
	for i := range children {
		c := &children[i]
		cs := s.child(c.key)
		cs.block = &blocker{field: c.key, elem: formatElem(s.name, s.val)}
		if _, _, err := a.applyNode(&c.node, cs); err != nil {
			return nil, false, err
		}
	}
	return s.val, true, nil
}

// createDoc builds the document for a missing slot from the children that
// create something; with none, the slot stays missing.
func (a *applier) createDoc(children []child, s slot) (any, bool, error) {
	var created bson.D
	for i := range children {
		c := &children[i]
		v, ok, err := a.applyNode(&c.node, s.child(c.key))
		if err != nil {
			return nil, false, err
		}
		if ok {
			created = append(created, bson.E{Key: c.key, Value: v})
		}
	}
	if created == nil {
		return nil, false, nil
	}
	return created, true, nil
}

// The documents and arrays an update reaches may be shared with the
// document it applies to, which is never modified: each is copied, one
// level, before it is changed, and the values the update leaves alone stay
// shared. A copy has no spare capacity (as a decoded document), so an
// append to it never writes into memory another document holds.

func copyDoc(d bson.D) bson.D { return append(make(bson.D, 0, len(d)), d...) }

func copyArray(a bson.A) bson.A { return append(make(bson.A, 0, len(a)), a...) }

// applyToDoc applies the children to a copy of cur's fields: setting,
// appending or removing each.
func (a *applier) applyToDoc(children []child, s slot, cur bson.D) (bson.D, error) {
	cur = copyDoc(cur)
	for i := range children {
		c := &children[i]
		idx := slices.IndexFunc(cur, func(e bson.E) bool { return e.Key == c.key })
		cs := s.child(c.key)
		cs.block = nil
		if idx >= 0 {
			cs.val, cs.exists = cur[idx].Value, true
		}
		v, ok, err := a.applyNode(&c.node, cs)
		if err != nil {
			return nil, err
		}
		switch {
		case ok && idx >= 0:
			cur[idx].Value = v
		case ok:
			cur = append(cur, bson.E{Key: c.key, Value: v})
		case idx >= 0:
			cur = slices.Delete(cur, idx, idx+1)
		}
	}
	return slices.Clip(cur), nil
}

// applyToArray applies the children to a copy of cur's elements by index,
// padding with nulls to reach an index past the end; a non-numeric key
// cannot be created in an array.
func (a *applier) applyToArray(children []child, s slot, cur bson.A) (any, bool, error) {
	cur = copyArray(cur)
	for j := range children {
		c := &children[j]
		cs := s.child(c.key)
		cs.arrayField = s.name
		i, isIndex := arrayIndex(c.key)
		switch {
		case !isIndex:
			cs.block = &blocker{field: c.key, elem: formatElem(s.name, cur)}
		case i < len(cur):
			cs.block, cs.val, cs.exists = nil, cur[i], true
		default:
			cs.block = nil
		}
		v, ok, err := a.applyNode(&c.node, cs)
		if err != nil {
			return nil, false, err
		}
		switch {
		case ok && isIndex:
			if i >= len(cur) {
				if i+1-len(cur) > maxPadding {
					return nil, false, &cmderr.Error{Code: codeCannotBackfillArray, Name: "CannotBackfillArray",
						Message: "can't backfill more than 1500000 elements"}
				}
				cur = append(cur, make(bson.A, i+1-len(cur))...)
			}
			cur[i] = v
		case !ok && cs.exists:
			cur[i] = nil // unsetting an array element leaves a null in its place
		}
	}
	return slices.Clip(cur), true, nil
}

// applyArrayNode applies n's "$[]" and "$[<identifier>]" children to a
// copy of the array's (matching) elements.
func (a *applier) applyArrayNode(n *node, s slot) (any, bool, error) {
	if !s.exists {
		return nil, false, cmderr.New(cmderr.BadValue,
			"The path '%s' must exist in the document in order to apply array updates.", s.dotted())
	}
	arr, ok := s.val.(bson.A)
	if !ok {
		return nil, false, cmderr.New(cmderr.BadValue,
			"Cannot apply array updates to non-array element %s", formatElem(s.name, s.val))
	}
	arr = copyArray(arr)
	for i, elem := range arr {
		var target *node
		for j := range n.children {
			c := &n.children[j]
			if c.key != "$[]" {
				id := c.key[2 : len(c.key)-1]
				f := a.filters[id]
				if f == nil || !f.Match(bson.D{{Key: id, Value: elem}}) {
					continue
				}
			}
			if target == nil {
				target = &c.node
				continue
			}
			merged, err := mergeNodes(target, &c.node, s.pathTo(strconv.Itoa(i)))
			if err != nil {
				return nil, false, err
			}
			target = merged
		}
		if target == nil {
			continue
		}
		cs := s.child(strconv.Itoa(i))
		cs.block, cs.val, cs.exists, cs.arrayField = nil, elem, true, s.name
		v, ok, err := a.applyNode(target, cs)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			v = nil
		}
		arr[i] = v
	}
	return arr, true, nil
}

// removePath returns doc without the field at path, copying each document
// it changes; every parent is a document (rename checked that).
func removePath(doc bson.D, path []string) bson.D {
	idx := slices.IndexFunc(doc, func(e bson.E) bool { return e.Key == path[0] })
	if idx < 0 {
		return doc
	}
	doc = copyDoc(doc)
	if len(path) == 1 {
		return slices.Clip(slices.Delete(doc, idx, idx+1))
	}
	if sub, ok := doc[idx].Value.(bson.D); ok {
		doc[idx].Value = removePath(sub, path[1:])
	}
	return doc
}

// lookupSource finds a $rename source in the original document.
func (a *applier) lookupSource(l *leaf) (any, bool, error) {
	var cur any = a.orig
	for i, part := range l.from {
		switch c := cur.(type) {
		case bson.D:
			v, ok := value.Get(c, part)
			if !ok {
				return nil, false, nil
			}
			cur = v
		case bson.A:
			return nil, false, cmderr.New(cmderr.BadValue,
				"The source field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
				l.fromPath, a.idDesc(), l.from[i-1])
		default:
			return nil, false, nil
		}
	}
	return cur, true, nil
}
