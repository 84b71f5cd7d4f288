package faultproxy

import (
	"encoding/binary"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// inbound is one decoded client message and what the rules look at.
type inbound struct {
	msg        wire.Message
	cmd        bson.Raw // the command document (OP_QUERY's $query unwrapped)
	name       string
	db         string
	hello      bool // hello / isMaster, either protocol
	moreToCome bool // the client expects no reply
}

// handshakeCommands are matched by a rule only when the rule names them in
// Commands: a catch-all rule that shed or dropped them would stop drivers
// from connecting and monitoring at all, which is rarely the test intended.
var handshakeCommands = map[string]bool{
	"hello": true, "ismaster": true, "saslstart": true, "saslcontinue": true,
	"authenticate": true, "getnonce": true,
}

func isHelloName(name string) bool {
	return strings.EqualFold(name, "hello") || strings.EqualFold(name, "isMaster")
}

// inspect extracts the command of a decoded client message. Anything it
// does not recognise gives an inbound with an empty name, which only
// catch-all rules match.
func inspect(m wire.Message) inbound {
	in := inbound{msg: m}
	switch {
	case m.Msg != nil:
		in.cmd = m.Msg.Body
		in.moreToCome = m.Msg.Flags&wire.MoreToCome != 0
		if v, err := in.cmd.LookupErr("$db"); err == nil {
			in.db, _ = v.StringValueOK()
		}
	case m.Query != nil:
		in.cmd = unwrapQuery(m.Query.Query)
		if i := strings.IndexByte(m.Query.FullCollectionName, '.'); i > 0 {
			in.db = m.Query.FullCollectionName[:i]
		}
	default:
		return in
	}
	in.name = wire.CommandName(in.cmd)
	in.hello = isHelloName(in.name)
	return in
}

// unwrapQuery returns the command inside a legacy {$query: {...}} wrapper.
func unwrapQuery(q bson.Raw) bson.Raw {
	switch wire.CommandName(q) {
	case "$query", "query":
		v, err := q.LookupErr(wire.CommandName(q))
		if err != nil {
			return q
		}
		if d, ok := v.DocumentOK(); ok {
			return d
		}
	}
	return q
}

// namespaces lists the "db.coll" namespaces a command names.
func (in *inbound) namespaces() []string {
	if in.cmd == nil || in.name == "" {
		return nil
	}
	var out []string
	add := func(coll string) {
		if coll != "" {
			out = append(out, in.db+"."+coll)
		}
	}
	switch strings.ToLower(in.name) {
	case "getmore":
		if v, err := in.cmd.LookupErr("collection"); err == nil {
			s, _ := v.StringValueOK()
			add(s)
		}
	case "bulkwrite":
		// nsInfo holds full namespaces, in the body or a document sequence.
		addNS := func(d bson.Raw) {
			if v, err := d.LookupErr("ns"); err == nil {
				if s, ok := v.StringValueOK(); ok {
					out = append(out, s)
				}
			}
		}
		if v, err := in.cmd.LookupErr("nsInfo"); err == nil {
			if arr, ok := v.ArrayOK(); ok {
				if vals, err := arr.Values(); err == nil {
					for _, ev := range vals {
						if d, ok := ev.DocumentOK(); ok {
							addNS(d)
						}
					}
				}
			}
		}
		if in.msg.Msg != nil {
			for _, seq := range in.msg.Msg.Sequences {
				if seq.Identifier == "nsInfo" {
					for _, d := range seq.Documents {
						addNS(d)
					}
				}
			}
		}
	default:
		if v, err := in.cmd.LookupErr(in.name); err == nil {
			s, _ := v.StringValueOK()
			add(s)
		}
	}
	return out
}

// appName returns client.application.name of a handshake hello.
func appName(cmd bson.Raw) string {
	v, err := cmd.LookupErr("client", "application", "name")
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}

// editDoc rebuilds doc, letting edit replace (return a new value and true)
// or drop (return drop) each top-level element. It reports whether anything
// changed; if not, doc is returned as it is.
func editDoc(doc bson.Raw, edit func(key string, v bson.RawValue) (nv bson.RawValue, replace, drop bool)) (bson.Raw, bool) {
	elems, err := doc.Elements()
	if err != nil {
		return doc, false
	}
	out := make([]byte, 4, len(doc)+64)
	changed := false
	for _, e := range elems {
		key, err := e.KeyErr()
		if err != nil {
			return doc, false
		}
		v, err := e.ValueErr()
		if err != nil {
			return doc, false
		}
		nv, replace, drop := edit(key, v)
		switch {
		case drop:
			changed = true
		case replace:
			changed = true
			out = appendElement(out, key, nv)
		default:
			out = append(out, e...)
		}
	}
	if !changed {
		return doc, false
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return bson.Raw(out), true
}

func appendElement(dst []byte, key string, v bson.RawValue) []byte {
	dst = append(dst, byte(v.Type))
	dst = append(dst, key...)
	dst = append(dst, 0)
	return append(dst, v.Value...)
}

func stringValue(s string) bson.RawValue {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(s)+1))
	b = append(b, s...)
	b = append(b, 0)
	return bson.RawValue{Type: bson.TypeString, Value: b}
}

func stringArray(list []string) bson.RawValue {
	b := make([]byte, 4, 16*len(list)+5)
	for i, s := range list {
		b = appendElement(b, strconv.Itoa(i), stringValue(s))
	}
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return bson.RawValue{Type: bson.TypeArray, Value: b}
}
