package js

import (
	"context"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// maxCallStack bounds script recursion (a RangeError past it), so a
// runaway recursion cannot exhaust the Go stack.
const maxCallStack = 4096

// maxCachedFunctions bounds the functions a runtime keeps evaluated.
const maxCachedFunctions = 256

// runner is one goja runtime with mongod's helpers installed. It is used
// by one goroutine at a time and returned to the pool after each run.
type runner struct {
	vm     *goja.Runtime
	protos protos
	fns    map[*Function]goja.Callable
	// origin maps the objects made from BSON documents during this run to
	// those documents, to keep int32 fields int32 on the way back.
	origin map[*goja.Object]any
	ctx    context.Context
	emit   func(key, value any) error
	// broken is set when a run panicked: the runtime is dropped, not
	// pooled, in case a script left it unusable.
	broken bool
}

var pool = sync.Pool{New: func() any { return newRunner() }}

func getRunner() *runner { return pool.Get().(*runner) }

func putRunner(r *runner) {
	if r.broken {
		return
	}
	clear(r.origin)
	r.ctx, r.emit = nil, nil
	if len(r.fns) > maxCachedFunctions {
		clear(r.fns)
	}
	pool.Put(r)
}

func newRunner() *runner {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	r := &runner{vm: vm, fns: map[*Function]goja.Callable{}, origin: map[*goja.Object]any{}}
	r.install()
	return r
}

// guard runs body with the runtime interrupted when ctx ends, and maps what
// it raised (or panicked with) to mongod's errors. The interrupt is cleared
// before the runner goes back to the pool.
func (r *runner) guard(ctx context.Context, emit func(k, v any) error, body func() error) (err error) {
	r.ctx, r.emit = ctx, emit
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		r.vm.Interrupt("interrupted")
		close(fired)
	})
	defer func() {
		if p := recover(); p != nil {
			// A helper's own failure (a script broke the prelude's
			// classes): the operation fails, the runtime is not reused.
			r.broken = true
			err = cmderr.New(JSInterpreterFailure, "internal error in a script helper: %v", p)
		}
		if !stop() {
			<-fired
		}
		r.vm.ClearInterrupt()
		if err != nil {
			err = scriptErr(ctx, err)
		} else if ctx.Err() != nil {
			// Interrupted where goja does not check (a sleep that was the
			// script's last call): the operation has ended all the same.
			err = interruptErr(ctx)
		}
	}()
	return body()
}

// function returns f evaluated in this runtime.
func (r *runner) function(f *Function) (goja.Callable, error) {
	if fn, ok := r.fns[f]; ok {
		return fn, nil
	}
	v, err := r.vm.RunProgram(f.prog)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		return nil, cmderr.New(JSInterpreterFailure, "TypeError: the code is not a function :\n")
	}
	r.fns[f] = fn
	return fn, nil
}

// sleep is the shell's sleep(ms): it blocks this operation only, and ends
// early (interrupting the script) when the operation's context ends.
func (r *runner) sleep(call goja.FunctionCall) goja.Value {
	ms := call.Argument(0).ToFloat()
	if ms > 0 {
		t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.ctx.Done():
			r.vm.Interrupt("interrupted")
		}
	}
	return goja.Undefined()
}

// emitFn is mapReduce's emit(key, value).
func (r *runner) emitFn(call goja.FunctionCall) goja.Value {
	if r.emit == nil {
		panic(r.vm.NewTypeError("emit is not a function"))
	}
	if len(call.Arguments) != 2 {
		panic(r.vm.NewGoError(errEmitArgs))
	}
	k, err := r.export(call.Arguments[0], nil, 0)
	if err != nil {
		panic(r.vm.NewGoError(err))
	}
	v, err := r.export(call.Arguments[1], nil, 0)
	if err != nil {
		panic(r.vm.NewGoError(err))
	}
	if err := r.emit(k, v); err != nil {
		panic(r.vm.NewGoError(err))
	}
	return goja.Undefined()
}
