package mongosim

import "testing"

// TestStmtTableDenseAndSparse stores statement ids in the slice and past
// it (negative, huge, and ahead of the slice until it grows to reach
// them), and finds each after reset no more.
func TestStmtTableDenseAndSparse(t *testing.T) {
	var tab stmtTable
	ids := []int{0, 1, 5000, -3, 1 << 40, 2, 999, 3000, 100001}
	for k, i := range ids {
		tab.put(i, stmtResult{N: int32(k + 1)})
	}
	for i := 3; i < 6000; i++ { // grows the slice over 3000's and 5000's places
		if i != 999 && i != 3000 && i != 4000 && i != 5000 {
			tab.put(i, stmtResult{N: -1})
		}
	}
	for k, i := range ids {
		if res, ok := tab.get(i); !ok || res.N != int32(k+1) {
			t.Errorf("statement %d: %v %v, want N %d", i, res, ok, k+1)
		}
	}
	if _, ok := tab.get(4000); ok {
		t.Error("statement 4000 found, never stored")
	}
	tab.reset()
	for _, i := range append(ids, 10) {
		if _, ok := tab.get(i); ok {
			t.Errorf("statement %d found after reset", i)
		}
	}
}
