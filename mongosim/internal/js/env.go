package js

import (
	"context"
	"errors"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Error codes mongod answers for server-side JavaScript.
const (
	// JSInterpreterFailure is a script that threw or did not compile.
	JSInterpreterFailure = cmderr.JSInterpreterFailure
	// codeWhereDisabled is $where when scripting is off.
	codeWhereDisabled = 6108304
	// codeFunctionDisabled is $function and $accumulator when scripting is off.
	codeFunctionDisabled = 31264
	// codeEmitDisabled is mapReduce's map when scripting is off.
	codeEmitDisabled = 31246
	// codeReduceDisabled is mapReduce's reduce when scripting is off.
	codeReduceDisabled = 31241
	// codeDepth is a value nested too deeply (or cyclic) to become BSON.
	codeDepth = 17279
)

// Env is what running a script depends on besides its code. A nil *Env
// means scripting is not available in that context.
type Env struct {
	// Ctx is the operation's context: its deadline is maxTimeMS, its
	// cancellation killOp or the member shutting down. nil: never ends.
	Ctx context.Context
	// Disabled turns scripting off, as mongod's
	// security.javascriptEnabled: false.
	Disabled bool
}

// Use is where a script runs; it selects mongod's error when scripting is
// disabled.
type Use int

// The places a script runs.
const (
	UseWhere Use = iota
	UseFunction
	UseAccumulator
	UseMap
	UseReduce
)

// Check answers mongod's error for running a script for use under env when
// scripting is disabled, and nil otherwise.
func (e *Env) Check(use Use) error {
	if e != nil && !e.Disabled {
		return nil
	}
	switch use {
	case UseWhere:
		return cmderr.New(codeWhereDisabled, "no globalScriptEngine in $where parsing")
	case UseMap:
		return cmderr.New(codeEmitDisabled, "Cannot run server-side javascript without the javascript engine enabled")
	case UseReduce:
		return cmderr.New(codeReduceDisabled, "Cannot run server-side javascript without the javascript engine enabled")
	}
	return cmderr.New(codeFunctionDisabled, "Cannot run server-side javascript without the javascript engine enabled")
}

func (e *Env) ctx() context.Context {
	if e == nil || e.Ctx == nil {
		return context.Background()
	}
	return e.Ctx
}

// interruptErr is the error for a script stopped because ctx ended:
// MaxTimeMSExpired for the deadline, Interrupted otherwise (killOp, the
// client or the member going away).
func interruptErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return cmderr.New(cmderr.MaxTimeMSExpired, "operation exceeded time limit")
	}
	return cmderr.New(cmderr.Interrupted, "operation was interrupted")
}
