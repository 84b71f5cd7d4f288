package geo

import (
	"container/heap"
	"math"
	"slices"
	"sort"

	"github.com/golang/geo/s1"
	"github.com/golang/geo/s2"
)

// finestLevel is the finest level of a line's or polygon's covering (about
// a metre, mongod's finestIndexedLevel); points keep their leaf cell.
const finestLevel = 23

// Cells returns the S2 cells a 2dsphere index keeps for s: each point's
// leaf cell and a covering of each line and polygon.
func Cells(s *Shape) []s2.CellID {
	out := make([]s2.CellID, 0, len(s.Points))
	for _, p := range s.Points {
		out = append(out, s2.CellFromPoint(p).ID())
	}
	if len(s.Lines) == 0 && len(s.Polys) == 0 {
		return out
	}
	rc := &s2.RegionCoverer{MaxLevel: finestLevel, MaxCells: 20}
	for _, l := range s.Lines {
		out = append(out, rc.Covering(l)...)
	}
	for _, p := range s.Polys {
		out = append(out, rc.Covering(p)...)
	}
	return out
}

// Index is an immutable sorted list of (cell, document) pairs: a 2dsphere
// index's geo keys, searched by cell coverings.
type Index struct {
	ids  []s2.CellID
	docs []int32
	n    int
}

type entry struct {
	id  s2.CellID
	doc int32
}

// BuildIndex builds an Index from each document's cells (cells[i] belongs
// to document i).
func BuildIndex(cells [][]s2.CellID) *Index {
	docs := make([]int32, len(cells))
	for i := range docs {
		docs[i] = int32(i)
	}
	return (&Index{}).Update(nil, docs, cells, len(cells))
}

// Update returns the index for a new numbering of n documents, in linear
// time plus the sorting of the new cells: remap[d] is the new number of
// old document d (-1: gone or changed), cells[i] are the cells of new
// document docs[i]. The receiver is unchanged.
func (ix *Index) Update(remap []int32, docs []int32, cells [][]s2.CellID, n int) *Index {
	var fresh []entry
	for i, cs := range cells {
		for _, c := range cs {
			fresh = append(fresh, entry{c, docs[i]})
		}
	}
	slices.SortFunc(fresh, func(a, b entry) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return int(a.doc - b.doc)
	})
	out := &Index{ids: make([]s2.CellID, 0, len(ix.ids)+len(fresh)), docs: make([]int32, 0, len(ix.ids)+len(fresh)), n: n}
	i, j := 0, 0
	for i < len(ix.ids) || j < len(fresh) {
		if i < len(ix.ids) && remap[ix.docs[i]] < 0 {
			i++
			continue
		}
		if j == len(fresh) || (i < len(ix.ids) && ix.ids[i] <= fresh[j].id) {
			out.ids, out.docs = append(out.ids, ix.ids[i]), append(out.docs, remap[ix.docs[i]])
			i++
			continue
		}
		out.ids, out.docs = append(out.ids, fresh[j].id), append(out.docs, fresh[j].doc)
		j++
	}
	return out
}

// candidates calls fn once for each unseen document having a cell that
// intersects a cell of the covering.
func (ix *Index) candidates(covering []s2.CellID, seen []bool, fn func(doc int)) {
	visit := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := int(ix.docs[i])
			if !seen[d] {
				seen[d] = true
				fn(d)
			}
		}
	}
	for _, c := range covering {
		lo := sort.Search(len(ix.ids), func(i int) bool { return ix.ids[i] >= c.RangeMin() })
		hi := sort.Search(len(ix.ids), func(i int) bool { return ix.ids[i] > c.RangeMax() })
		visit(lo, hi)
		for l := c.Level() - 1; l >= 0; l-- {
			p := c.Parent(l)
			lo := sort.Search(len(ix.ids), func(i int) bool { return ix.ids[i] >= p })
			hi := lo
			for hi < len(ix.ids) && ix.ids[hi] == p {
				hi++
			}
			visit(lo, hi)
		}
	}
}

// startRadius is the first search radius of Near (about 64 m); it grows
// fourfold per round.
const startRadius = 1e-5

// Near visits the documents in order of distance from n's point, for a
// spherical query: dist measures document i in the query's units (false:
// not measurable), and emit returns false to stop. It covers caps of
// growing radius, so documents far away are never measured when emit
// stops early or n has a $maxDistance.
func (ix *Index) Near(n *Near, dist func(doc int) (float64, bool), emit func(doc int, d float64) bool) {
	seen := make([]bool, ix.n)
	var pending hits
	maxA := math.Min(float64(n.toAngle(n.Max)), math.Pi)
	r := math.Max(startRadius, float64(n.toAngle(n.Min))/2)
	rc := &s2.RegionCoverer{MaxLevel: 30, MaxCells: 16}
	for {
		rad := math.Min(r, maxA)
		c := s2.CapFromCenterAngle(n.Point, s1.Angle(rad*(1+1e-9)+1e-15))
		ix.candidates(rc.Covering(c), seen, func(doc int) {
			if d, ok := dist(doc); ok && n.Accepts(d) {
				heap.Push(&pending, hit{d, doc})
			}
		})
		last := rad >= maxA
		limit := n.fromAngle(s1.Angle(rad))
		for pending.Len() > 0 && (last || pending[0].d <= limit) {
			h := heap.Pop(&pending).(hit)
			if !emit(h.doc, h.d) {
				return
			}
		}
		if last {
			return
		}
		r *= 4
	}
}

type hit struct {
	d   float64
	doc int
}

// hits is a min-heap by distance, then document order.
type hits []hit

func (h hits) Len() int { return len(h) }
func (h hits) Less(i, j int) bool {
	if h[i].d != h[j].d {
		return h[i].d < h[j].d
	}
	return h[i].doc < h[j].doc
}
func (h hits) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hits) Push(x any)   { *h = append(*h, x.(hit)) }
func (h *hits) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
