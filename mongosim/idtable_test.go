package mongosim

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestIDTableMatchesMap runs random puts, replacements and deletes on an
// idTable and a map side by side over a small key space (long probe runs,
// wrap-around at the table's end, deletes moving records back) and checks
// that every key answers the same after each step.
func TestIDTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const universe = 3000
	keys := make([]string, universe)
	for i := range keys {
		keys[i] = "n" + strconv.Itoa(i)
	}
	tab, ref := newIDTable(), map[string]*record{}
	check := func(step int) {
		t.Helper()
		if tab.n != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, tab.n, len(ref))
		}
		for _, k := range keys {
			if got, want := tab.get(k), ref[k]; got != want {
				t.Fatalf("step %d: get(%q) = %p, want %p", step, k, got, want)
			}
		}
	}
	for step := range 60000 {
		k := keys[rng.IntN(universe)]
		switch op := rng.IntN(10); {
		case op < 5: // insert or replace
			r := &record{idKey: k}
			tab.put(r)
			ref[k] = r
		default:
			tab.del(k)
			delete(ref, k)
		}
		if step%997 == 0 {
			check(step)
		}
	}
	check(-1)
	for _, k := range keys {
		tab.del(k)
	}
	if tab.n != 0 || tab.get(keys[0]) != nil {
		t.Fatalf("after deleting every key: len %d", tab.n)
	}
	var none *idTable
	if none.get("x") != nil {
		t.Fatal("a nil table found a record")
	}
}

// TestIDTableGrowsKeepingRecords fills a table past several doublings and
// finds every record, and none of the keys never stored.
func TestIDTableGrowsKeepingRecords(t *testing.T) {
	tab := newIDTable()
	recs := make([]*record, 100000)
	for i := range recs {
		recs[i] = &record{idKey: "o" + strconv.Itoa(i)}
		tab.put(recs[i])
	}
	for i, r := range recs {
		if tab.get(r.idKey) != r {
			t.Fatalf("record %d lost", i)
		}
		if tab.get("x"+strconv.Itoa(i)) != nil {
			t.Fatalf("found a record for a key never stored")
		}
	}
	if tab.n != len(recs) {
		t.Fatalf("len %d", tab.n)
	}
}

// TestIDTableShrinksAfterDeletes empties most of a large table and checks
// that it gives its slots back, keeping every remaining record, and that
// it grows again when refilled.
func TestIDTableShrinksAfterDeletes(t *testing.T) {
	tab := newIDTable()
	recs := make([]*record, 100000)
	for i := range recs {
		recs[i] = &record{idKey: "o" + strconv.Itoa(i)}
		tab.put(recs[i])
	}
	full := len(tab.slots)
	const keep = 100
	for _, r := range recs[keep:] {
		tab.del(r.idKey)
	}
	if tab.n != keep {
		t.Fatalf("len %d, want %d", tab.n, keep)
	}
	if len(tab.slots) >= shrinkMinSlots {
		t.Fatalf("%d slots left for %d records (%d when full)", len(tab.slots), keep, full)
	}
	for i, r := range recs {
		got, want := tab.get(r.idKey), r
		if i >= keep {
			want = nil
		}
		if got != want {
			t.Fatalf("record %d: got %p, want %p", i, got, want)
		}
	}
	for _, r := range recs[keep:] {
		tab.put(r)
	}
	for i, r := range recs {
		if tab.get(r.idKey) != r {
			t.Fatalf("record %d lost after refilling", i)
		}
	}
	if len(tab.slots) != full {
		t.Fatalf("refilled to %d slots, was %d", len(tab.slots), full)
	}
}
