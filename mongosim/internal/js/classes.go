package js

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// exportClass converts an instance of one of the shell's BSON classes; ok
// is false for any other object.
func (r *runner) exportClass(o *goja.Object) (v any, ok bool, err error) {
	p := &r.protos
	switch o.Prototype() {
	case nil:
		return nil, false, nil
	case p.long:
		n, err := strconv.ParseInt(o.Get("__long").String(), 10, 64)
		return n, true, err
	case p.int:
		return int32(o.Get("__int").ToInteger()), true, nil
	case p.dec:
		d, err := bson.ParseDecimal128(o.Get("__dec").String())
		return d, true, err
	case p.oid:
		id, err := bson.ObjectIDFromHex(o.Get("str").String())
		return id, true, err
	case p.ts:
		return bson.Timestamp{T: uint32(o.Get("t").ToInteger()), I: uint32(o.Get("i").ToInteger())}, true, nil
	case p.bin:
		data, err := base64.StdEncoding.DecodeString(o.Get("__b64").String())
		return bson.Binary{Subtype: byte(o.Get("type").ToInteger()), Data: data}, true, err
	case p.minKey:
		return bson.MinKey{}, true, nil
	case p.maxKey:
		return bson.MaxKey{}, true, nil
	case p.dbPointer:
		id, err := bson.ObjectIDFromHex(o.Get("id").ToObject(r.vm).Get("str").String())
		return bson.DBPointer{DB: o.Get("ns").String(), Pointer: id}, true, err
	case p.code:
		code := bson.JavaScript(o.Get("code").String())
		if s := o.Get("scope"); s != nil && !goja.IsUndefined(s) && !goja.IsNull(s) {
			scope, err := r.export(s, nil, 1)
			return bson.CodeWithScope{Code: code, Scope: scope}, true, err
		}
		return code, true, nil
	}
	return nil, false, nil
}

func (r *runner) callMethod(o *goja.Object, name string) goja.Value {
	fn, ok := goja.AssertFunction(o.Get(name))
	if !ok {
		return goja.Undefined()
	}
	v, err := fn(o)
	if err != nil {
		panic(err)
	}
	return v
}

// install sets up the shell helpers: the prelude's classes and functions,
// and the native functions they call.
func (r *runner) install() {
	vm := r.vm
	native := vm.NewObject()
	set := func(name string, fn func(goja.FunctionCall) goja.Value) { _ = native.Set(name, fn) }
	set("long", r.parseLong)
	set("decimal", r.parseDecimal)
	set("oid", r.parseOID)
	set("isodate", r.parseISODate)
	set("uuid", r.parseUUID)
	set("hex2b64", r.hexToBase64)
	set("b642hex", r.base64ToHex)
	set("md5", func(c goja.FunctionCall) goja.Value {
		sum := md5.Sum([]byte(c.Argument(0).String()))
		return vm.ToValue(hex.EncodeToString(sum[:]))
	})
	set("print", func(c goja.FunctionCall) goja.Value {
		parts := make([]string, len(c.Arguments))
		for i, a := range c.Arguments {
			parts[i] = a.String()
		}
		slog.Debug("mongosim script print", "text", strings.Join(parts, " "))
		return goja.Undefined()
	})
	set("sleep", r.sleep)
	set("emit", r.emitFn)
	set("bsonsize", func(c goja.FunctionCall) goja.Value {
		v, err := r.export(c.Argument(0), nil, 0)
		if err != nil {
			panic(vm.NewGoError(err))
		}
		b, err := bson.Marshal(bson.D{{Key: "", Value: v}})
		if err != nil {
			return vm.ToValue(0)
		}
		return vm.ToValue(len(b) - 7) // the wrapper's header, type, key and terminator
	})
	prelude, err := vm.RunProgram(preludeProgram)
	if err != nil {
		panic(err)
	}
	install, _ := goja.AssertFunction(prelude)
	if _, err := install(goja.Undefined(), vm.GlobalObject(), native); err != nil {
		panic(err)
	}
	proto := func(name string) *goja.Object {
		return vm.Get(name).ToObject(vm).Get("prototype").ToObject(vm)
	}
	r.protos = protos{
		long: proto("NumberLong"), int: proto("NumberInt"), dec: proto("NumberDecimal"),
		oid: proto("ObjectId"), ts: proto("Timestamp"), bin: proto("BinData"),
		minKey: proto("MinKey"), maxKey: proto("MaxKey"), code: proto("Code"), dbPointer: proto("DBPointer"),
		ctors: map[string]goja.Value{},
	}
	for _, c := range []string{"NumberLong", "NumberInt", "NumberDecimal", "ObjectId", "Timestamp", "BinData", "MinKey", "MaxKey", "Code", "DBPointer"} {
		r.protos.ctors[c] = vm.Get(c)
	}
}

func (r *runner) throw(format string, args ...any) {
	panic(r.vm.NewGoError(cmderr.New(cmderr.BadValue, format, args...)))
}

// parseLong is NumberLong's argument check: a number or a decimal string.
func (r *runner) parseLong(c goja.FunctionCall) goja.Value {
	a := c.Argument(0)
	if s, ok := a.Export().(string); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			r.throw("could not convert %q to NumberLong", s)
		}
		return r.vm.ToValue(strconv.FormatInt(n, 10))
	}
	f := a.ToFloat()
	if math.IsNaN(f) || f >= math.MaxInt64 || f < math.MinInt64 {
		r.throw("number passed to NumberLong must be representable as an int64_t")
	}
	return r.vm.ToValue(strconv.FormatInt(int64(f), 10))
}

func (r *runner) parseDecimal(c goja.FunctionCall) goja.Value {
	a := c.Argument(0)
	s := a.String()
	if _, isNum := a.Export().(float64); isNum {
		s = strconv.FormatFloat(a.ToFloat(), 'g', 15, 64)
	}
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		r.throw("Failed to parse string to decimal")
	}
	return r.vm.ToValue(d.String())
}

func (r *runner) parseOID(c goja.FunctionCall) goja.Value {
	a := c.Argument(0)
	if goja.IsUndefined(a) {
		return r.vm.ToValue(bson.NewObjectID().Hex())
	}
	id, err := bson.ObjectIDFromHex(a.String())
	if err != nil {
		r.throw("invalid object id: length")
	}
	return r.vm.ToValue(id.Hex())
}

// parseISODate accepts what the shell's ISODate does: a date, optionally
// with a time, fractional seconds and a zone.
func (r *runner) parseISODate(c goja.FunctionCall) goja.Value {
	s := strings.TrimSpace(c.Argument(0).String())
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02", "20060102"} {
		if t, err := time.Parse(layout, s); err == nil {
			return r.vm.ToValue(t.UnixMilli())
		}
	}
	r.throw("invalid ISO date: %s", s)
	return nil
}

func (r *runner) parseUUID(c goja.FunctionCall) goja.Value {
	a := c.Argument(0)
	var b []byte
	if goja.IsUndefined(a) {
		b = make([]byte, 16)
		_, _ = rand.Read(b)
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
	} else {
		var err error
		b, err = hex.DecodeString(strings.ReplaceAll(a.String(), "-", ""))
		if err != nil || len(b) != 16 {
			r.throw("UUID string must have 32 hex digits")
		}
	}
	return r.vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

func (r *runner) hexToBase64(c goja.FunctionCall) goja.Value {
	b, err := hex.DecodeString(c.Argument(0).String())
	if err != nil {
		r.throw("invalid hex string")
	}
	return r.vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

func (r *runner) base64ToHex(c goja.FunctionCall) goja.Value {
	b, err := base64.StdEncoding.DecodeString(c.Argument(0).String())
	if err != nil {
		r.throw("invalid base64 string")
	}
	return r.vm.ToValue(hex.EncodeToString(b))
}

var errEmitArgs = cmderr.New(JSInterpreterFailure, "emit takes 2 args")
