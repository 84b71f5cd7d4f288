package csot

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Inside a transaction's timeout operations share its deadline; one that
// sets its own timeout (a new WithOperationTimeout, or an earlier context
// deadline) is marked with ErrOverride, while the timeout the transaction
// itself consumed is no override.
func TestStartInsideTxn(t *testing.T) {
	outer := WithOperationTimeout(context.Background(), time.Minute)
	tctx, cancel := StartTxn(outer, time.Minute)
	defer cancel()
	dl, _ := tctx.Deadline()

	ctx, done := Start(tctx, nil)
	done()
	if err := Err(ctx); err != nil {
		t.Fatalf("the transaction's own timeout: %v", err)
	}
	if got, _ := Deadline(ctx); !got.Equal(dl) {
		t.Errorf("deadline %v, want the transaction's %v", got, dl)
	}
	// A cursor in the transaction keeps its deadline and stays in it.
	if c := WithoutMaxTime(ctx); !InTxn(c) || SendMaxTime(c) {
		t.Error("WithoutMaxTime left the transaction or kept maxTimeMS")
	}

	ctx, done = Start(WithOperationTimeout(tctx, time.Second))
	done()
	if !errors.Is(Err(ctx), ErrOverride) {
		t.Errorf("WithOperationTimeout inside: %v", Err(ctx))
	}
	early, stop := context.WithTimeout(tctx, time.Second)
	defer stop()
	ctx, done = Start(early)
	done()
	if !errors.Is(Err(ctx), ErrOverride) {
		t.Errorf("earlier deadline inside: %v", Err(ctx))
	}

	// Outside a transaction an operation-level timeout is simply used.
	ctx, done = Start(WithOperationTimeout(context.Background(), time.Second))
	defer done()
	if Err(ctx) != nil || InTxn(ctx) {
		t.Errorf("outside a transaction: %v", Err(ctx))
	}
}
