package sturdy

import (
	"context"
	"time"

	"github.com/sturdy-go/sturdy/internal/csot"
)

// WithTimeout sets the timeoutMS of the operations run with the returned
// context, overriding the client's, database's and collection's: d bounds
// each whole operation, its clock starting when the operation starts. d = 0
// means no limit (legacy timeouts are still ignored). Unlike
// context.WithTimeout it needs no cancel: the deadline is made, and
// released, inside each operation. An earlier deadline of ctx still wins.
// A negative d makes the operation fail with an argument error.
func WithTimeout(ctx context.Context, d time.Duration) context.Context {
	return csot.WithOperationTimeout(ctx, d)
}
