package mongosim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Cluster and
// driver client is closed by its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
