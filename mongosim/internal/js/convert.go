package js

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// maxDepth is mongod's limit on nesting when a script's value becomes BSON
// (it also catches cycles).
const maxDepth = 150

// protos are the prototypes of the shell's BSON classes, by which a
// script's objects are recognised on the way back to BSON.
type protos struct {
	long, int, dec, oid, ts, bin, minKey, maxKey, code, dbPointer *goja.Object
	ctors                                                         map[string]goja.Value
}

func (r *runner) newObj(class string, args ...any) goja.Value {
	vals := make([]goja.Value, len(args))
	for i, a := range args {
		vals[i] = r.vm.ToValue(a)
	}
	o, err := r.vm.New(r.protos.ctors[class], vals...)
	if err != nil {
		panic(err) // only the prelude's own constructors are called
	}
	return o
}

// toJS converts a BSON value into a JavaScript value.
func (r *runner) toJS(v any, depth int) goja.Value {
	switch x := v.(type) {
	case nil, bson.Null:
		return goja.Null()
	case bson.Undefined:
		return goja.Undefined()
	case string:
		return r.vm.ToValue(x)
	case bson.Symbol:
		return r.vm.ToValue(string(x))
	case bool:
		return r.vm.ToValue(x)
	case int32:
		return r.vm.ToValue(int64(x))
	case int:
		return r.vm.ToValue(float64(x))
	case float64:
		return r.vm.ToValue(x)
	case int64:
		return r.newObj("NumberLong", strconv.FormatInt(x, 10))
	case bson.Decimal128:
		return r.newObj("NumberDecimal", x.String())
	case bson.ObjectID:
		return r.newObj("ObjectId", x.Hex())
	case bson.DateTime:
		d, _ := r.vm.New(r.vm.Get("Date"), r.vm.ToValue(int64(x)))
		return d
	case bson.Timestamp:
		return r.newObj("Timestamp", x.T, x.I)
	case bson.Binary:
		return r.newObj("BinData", int(x.Subtype), base64.StdEncoding.EncodeToString(x.Data))
	case bson.MinKey:
		return r.newObj("MinKey")
	case bson.MaxKey:
		return r.newObj("MaxKey")
	case bson.Regex:
		return r.regexp(x)
	case bson.JavaScript:
		return r.code(string(x), nil)
	case bson.CodeWithScope:
		return r.code(string(x.Code), x.Scope)
	case bson.DBPointer:
		return r.newObj("DBPointer", x.DB, r.newObj("ObjectId", x.Pointer.Hex()))
	case bson.D:
		return r.docToJS(x, depth)
	case bson.M:
		d := make(bson.D, 0, len(x))
		for k, e := range x {
			d = append(d, bson.E{Key: k, Value: e})
		}
		return r.docToJS(d, depth)
	case bson.Raw:
		var d bson.D
		if bson.Unmarshal(x, &d) == nil {
			return r.docToJS(d, depth)
		}
		return goja.Null()
	case bson.A:
		return r.arrayToJS(x, depth)
	case []any:
		return r.arrayToJS(bson.A(x), depth)
	}
	return goja.Undefined()
}

func (r *runner) docToJS(d bson.D, depth int) goja.Value {
	o := r.vm.NewObject()
	for _, e := range d {
		_ = o.Set(e.Key, r.toJS(e.Value, depth+1))
	}
	r.origin[o] = d
	return o
}

func (r *runner) arrayToJS(a bson.A, depth int) goja.Value {
	items := make([]any, len(a))
	for i, e := range a {
		items[i] = r.toJS(e, depth+1)
	}
	o := r.vm.NewArray(items...)
	r.origin[o] = a
	return o
}

// regexp makes a RegExp, keeping the options JavaScript knows.
func (r *runner) regexp(x bson.Regex) goja.Value {
	var flags strings.Builder
	for _, c := range x.Options {
		if strings.ContainsRune("gimsuy", c) {
			flags.WriteRune(c)
		}
	}
	re, err := r.vm.New(r.vm.Get("RegExp"), r.vm.ToValue(x.Pattern), r.vm.ToValue(flags.String()))
	if err != nil {
		return r.vm.ToValue(x.Pattern)
	}
	return re
}

// code turns BSON code into a function, as mongod does; code that does not
// compile stays a Code object.
func (r *runner) code(src string, scope any) goja.Value {
	if p, err := compileSource(src); err == nil {
		if v, err := r.vm.RunProgram(p); err == nil {
			return v
		}
	}
	if scope != nil {
		return r.newObj("Code", src, r.toJS(scope, 0))
	}
	return r.newObj("Code", src)
}

// export converts a JavaScript value into a BSON value. origin is the
// document the value is a field of (nil: none), key its name there.
func (r *runner) export(v goja.Value, origin *fieldOrigin, depth int) (any, error) {
	if depth > maxDepth {
		return nil, cmderr.New(codeDepth, "Exceeded depth limit of %d when converting js object to BSON. Do you have a cycle?", maxDepth)
	}
	if v == nil || goja.IsUndefined(v) {
		return bson.Undefined{}, nil
	}
	if goja.IsNull(v) {
		return nil, nil
	}
	o, ok := v.(*goja.Object)
	if !ok {
		switch x := v.Export().(type) {
		case string:
			return x, nil
		case bool:
			return x, nil
		case int64:
			return origin.number(float64(x)), nil
		case float64:
			return origin.number(x), nil
		}
		return v.String(), nil // symbols, bigints
	}
	if b, ok, err := r.exportClass(o); ok || err != nil {
		return b, err
	}
	switch o.ClassName() {
	case "Array":
		return r.exportArray(o, depth)
	case "Function":
		return bson.JavaScript(o.String()), nil
	case "Date":
		return bson.DateTime(r.callMethod(o, "getTime").ToInteger()), nil
	case "RegExp":
		src := o.Get("source").String()
		return bson.Regex{Pattern: src, Options: sortedFlags(o.Get("flags").String())}, nil
	}
	return r.exportDoc(o, depth)
}

// fieldOrigin is where a number came from: mongod keeps a field int32 when
// the document's field was int32 and the number is still integral.
type fieldOrigin struct {
	src any // bson.D or bson.A
	key string
	idx int
}

func (f *fieldOrigin) number(x float64) any {
	if f == nil || x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
		return x
	}
	var was any
	switch src := f.src.(type) {
	case bson.D:
		for _, e := range src {
			if e.Key == f.key {
				was = e.Value
				break
			}
		}
	case bson.A:
		if f.idx < len(src) {
			was = src[f.idx]
		}
	}
	if _, ok := was.(int32); ok {
		return int32(x)
	}
	return x
}

func (r *runner) exportDoc(o *goja.Object, depth int) (any, error) {
	keys := o.Keys()
	d := make(bson.D, 0, len(keys))
	orig := r.origin[o]
	for _, k := range keys {
		var fo *fieldOrigin
		if orig != nil {
			fo = &fieldOrigin{src: orig, key: k}
		}
		fv := o.Get(k)
		x, err := r.export(fv, fo, depth+1)
		if err != nil {
			return nil, err
		}
		d = append(d, bson.E{Key: k, Value: x})
	}
	return d, nil
}

func (r *runner) exportArray(o *goja.Object, depth int) (any, error) {
	n := int(o.Get("length").ToInteger())
	a := make(bson.A, 0, n)
	orig := r.origin[o]
	for i := 0; i < n; i++ {
		var fo *fieldOrigin
		if orig != nil {
			fo = &fieldOrigin{src: orig, idx: i}
		}
		x, err := r.export(o.Get(strconv.Itoa(i)), fo, depth+1)
		if err != nil {
			return nil, err
		}
		a = append(a, x)
	}
	return a, nil
}

func sortedFlags(f string) string {
	var b strings.Builder
	for _, c := range "imsux" {
		if strings.ContainsRune(f, c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}
