package js

import "github.com/dop251/goja"

// preludeProgram defines mongod's shell helpers in every runtime. Values
// that need Go (parsing, hashing, sleeping, emitting) call into native.
var preludeProgram = goja.MustCompile("prelude", preludeSource, false)

const preludeSource = `(function(g, native) {
var defineProperty = Object.defineProperty; // a script may replace the global one
function hide(o, k, v) { defineProperty(o, k, {value: v, enumerable: false, writable: true, configurable: true}); }
function method(C, name, fn) { hide(C.prototype, name, fn); }

function NumberLong(v) {
	if (!(this instanceof NumberLong)) return new NumberLong(v);
	hide(this, '__long', native.long(v === undefined ? 0 : v));
}
method(NumberLong, 'valueOf', function() { return Number(this.__long); });
method(NumberLong, 'toNumber', function() { return Number(this.__long); });
method(NumberLong, 'exactValueString', function() { return this.__long; });
method(NumberLong, 'toString', function() {
	var n = Number(this.__long);
	return Number.isSafeInteger(n) ? 'NumberLong(' + this.__long + ')' : 'NumberLong("' + this.__long + '")';
});
method(NumberLong, 'tojson', function() { return this.toString(); });
method(NumberLong, 'compare', function(o) {
	var a = BigInt(this.__long), b = BigInt(o instanceof NumberLong ? o.__long : Math.trunc(Number(o)));
	return a < b ? -1 : a > b ? 1 : 0;
});
Object.defineProperty(NumberLong.prototype, 'floatApprox', {get: function() { return Number(this.__long); }});

function NumberInt(v) {
	if (!(this instanceof NumberInt)) return new NumberInt(v);
	hide(this, '__int', v === undefined ? 0 : (Number(v) | 0));
}
method(NumberInt, 'valueOf', function() { return this.__int; });
method(NumberInt, 'toNumber', function() { return this.__int; });
method(NumberInt, 'toString', function() { return 'NumberInt(' + this.__int + ')'; });
method(NumberInt, 'tojson', function() { return this.toString(); });

function NumberDecimal(v) {
	if (!(this instanceof NumberDecimal)) return new NumberDecimal(v);
	hide(this, '__dec', native.decimal(v === undefined ? '0' : v));
}
method(NumberDecimal, 'toString', function() { return 'NumberDecimal("' + this.__dec + '")'; });
method(NumberDecimal, 'tojson', function() { return this.toString(); });
method(NumberDecimal, 'toJSON', function() { return {$numberDecimal: this.__dec}; });

function ObjectId(hex) {
	if (!(this instanceof ObjectId)) return new ObjectId(hex);
	hide(this, 'str', native.oid(hex));
}
method(ObjectId, 'toString', function() { return 'ObjectId("' + this.str + '")'; });
method(ObjectId, 'tojson', function() { return this.toString(); });
method(ObjectId, 'toHexString', function() { return this.str; });
method(ObjectId, 'valueOf', function() { return this.str; });
method(ObjectId, 'toJSON', function() { return this.str; });
method(ObjectId, 'equals', function(o) { return o instanceof ObjectId && o.str === this.str; });
method(ObjectId, 'getTimestamp', function() { return new Date(parseInt(this.str.substr(0, 8), 16) * 1000); });

function Timestamp(t, i) {
	if (!(this instanceof Timestamp)) return new Timestamp(t, i);
	this.t = t === undefined ? 0 : Number(t);
	this.i = i === undefined ? 0 : Number(i);
}
method(Timestamp, 'getTime', function() { return this.t; });
method(Timestamp, 'getInc', function() { return this.i; });
method(Timestamp, 'toString', function() { return 'Timestamp(' + this.t + ', ' + this.i + ')'; });
method(Timestamp, 'tojson', function() { return this.toString(); });

function BinData(type, b64) {
	if (!(this instanceof BinData)) return new BinData(type, b64);
	hide(this, '__b64', String(b64));
	this.type = Number(type);
	this.len = native.b642hex(String(b64)).length / 2;
}
method(BinData, 'base64', function() { return this.__b64; });
method(BinData, 'hex', function() { return native.b642hex(this.__b64); });
method(BinData, 'subtype', function() { return this.type; });
method(BinData, 'length', function() { return this.len; });
method(BinData, 'toString', function() {
	if (this.type === 4) {
		var h = this.hex();
		return 'UUID("' + h.substr(0, 8) + '-' + h.substr(8, 4) + '-' + h.substr(12, 4) + '-' + h.substr(16, 4) + '-' + h.substr(20) + '")';
	}
	return 'BinData(' + this.type + ',"' + this.__b64 + '")';
});
method(BinData, 'tojson', function() { return this.toString(); });
function UUID(s) { return new BinData(4, native.uuid(s)); }
function HexData(type, h) { return new BinData(type, native.hex2b64(h)); }
function MD5(h) { return new BinData(5, native.hex2b64(h)); }

function MinKey() { if (!(this instanceof MinKey)) return new MinKey(); }
method(MinKey, 'tojson', function() { return '{ "$minKey" : 1 }'; });
method(MinKey, 'toString', function() { return '[object Function]'; });
function MaxKey() { if (!(this instanceof MaxKey)) return new MaxKey(); }
method(MaxKey, 'tojson', function() { return '{ "$maxKey" : 1 }'; });
method(MaxKey, 'toString', function() { return '[object Function]'; });

function Code(code, scope) {
	if (!(this instanceof Code)) return new Code(code, scope);
	this.code = String(code);
	if (scope !== undefined) this.scope = scope;
}
method(Code, 'toString', function() { return 'Code(' + JSON.stringify(this.code) + ')'; });
method(Code, 'tojson', function() { return this.toString(); });
function DBPointer(ns, id) {
	if (!(this instanceof DBPointer)) return new DBPointer(ns, id);
	this.ns = ns; this.id = id;
}
method(DBPointer, 'tojson', function() { return 'DBPointer("' + this.ns + '", ' + tojson(this.id) + ')'; });

function ISODate(s) { return s === undefined ? new Date() : new Date(native.isodate(s)); }
hide(Date.prototype, 'tojson', function() {
	return isNaN(this.getTime()) ? 'ISODate("Invalid Date")' : 'ISODate("' + this.toISOString() + '")';
});

function tojsonKey(k) { return JSON.stringify(k); }
function tojson(x, indent, nolint) {
	if (indent === undefined) indent = '';
	if (x === null) return 'null';
	if (x === undefined) return 'undefined';
	switch (typeof x) {
	case 'string': return JSON.stringify(x);
	case 'number': case 'boolean': return String(x);
	case 'function': return x.toString();
	case 'bigint': return String(x);
	}
	if (typeof x.tojson === 'function' && x.tojson !== tojson) return x.tojson(indent, nolint);
	if (x instanceof RegExp) return x.toString();
	var nl = nolint ? ' ' : '\n', inner = nolint ? '' : indent + '\t';
	if (Array.isArray(x)) {
		if (x.length === 0) return '[ ]';
		var parts = [];
		for (var i = 0; i < x.length; i++) parts.push(inner + tojson(x[i], inner, nolint));
		return '[' + nl + parts.join(',' + nl) + nl + (nolint ? '' : indent) + ']';
	}
	var keys = Object.keys(x);
	if (keys.length === 0) return '{ }';
	var fields = [];
	for (var j = 0; j < keys.length; j++) fields.push(inner + tojsonKey(keys[j]) + ' : ' + tojson(x[keys[j]], inner, nolint));
	return '{' + nl + fields.join(',' + nl) + nl + (nolint ? '' : indent) + '}';
}
function tojsononeline(x) { return tojson(x, ' ', true); }
function print() { native.print.apply(null, arguments); }
function printjson(x) { print(tojson(x)); }
function printjsononeline(x) { print(tojsononeline(x)); }

Array.sum = function(a) {
	if (a.length === 0) return null;
	var s = a[0];
	for (var i = 1; i < a.length; i++) s += a[i];
	return s;
};
Array.avg = function(a) { return a.length === 0 ? null : Array.sum(a) / a.length; };
Array.contains = function(a, x) { for (var i = 0; i < a.length; i++) if (a[i] === x) return true; return false; };
Array.unique = function(a) { var u = []; for (var i = 0; i < a.length; i++) if (!Array.contains(u, a[i])) u.push(a[i]); return u; };
Array.shuffle = function(a) { for (var i = a.length - 1; i > 0; i--) { var j = Math.floor(Math.random() * (i + 1)); var t = a[i]; a[i] = a[j]; a[j] = t; } return a; };
Array.tojson = function(a, indent, nolint) { return tojson(a, indent, nolint); };
Array.stdDev = function(a) {
	var avg = Array.avg(a), sum = 0;
	for (var i = 0; i < a.length; i++) sum += (a[i] - avg) * (a[i] - avg);
	return Math.sqrt(sum / a.length);
};
Object.extend = function(dst, src, deep) {
	for (var k in src) {
		var v = src[k];
		if (deep && typeof v === 'object' && v !== null) v = Object.extend(Array.isArray(v) ? [] : {}, v, true);
		dst[k] = v;
	}
	return dst;
};
Object.bsonsize = function(o) { return native.bsonsize(o); };
function isString(x) { return typeof x === 'string'; }
function isNumber(x) { return typeof x === 'number'; }
function isObject(x) { return typeof x === 'object' && x !== null; }

var helpers = {
	NumberLong: NumberLong, NumberInt: NumberInt, NumberDecimal: NumberDecimal, ObjectId: ObjectId,
	Timestamp: Timestamp, BinData: BinData, UUID: UUID, HexData: HexData, MD5: MD5, MinKey: MinKey,
	MaxKey: MaxKey, Code: Code, DBPointer: DBPointer, ISODate: ISODate, tojson: tojson,
	tojsononeline: tojsononeline, print: print, printjson: printjson, printjsononeline: printjsononeline,
	isString: isString, isNumber: isNumber, isObject: isObject,
	hex_md5: native.md5, sleep: native.sleep, emit: native.emit, gc: function() {},
	version: function() { return '8.0.0'; }
};
for (var name in helpers) g[name] = helpers[name];
})`
