package faultproxy

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// stripCompression re-encodes a client's hello without its compression
// field, so the server negotiates no compression and every later message
// stays readable. It returns nil when there was nothing to strip.
func stripCompression(in *inbound) []byte {
	drop := func(key string, _ bson.RawValue) (bson.RawValue, bool, bool) {
		return bson.RawValue{}, false, key == "compression"
	}
	h := in.msg.Header
	switch {
	case in.msg.Msg != nil:
		body, changed := editDoc(in.msg.Msg.Body, drop)
		if !changed {
			return nil
		}
		m := *in.msg.Msg
		m.Body = body
		return wire.AppendMsg(nil, h.RequestID, h.ResponseTo, &m)
	case in.msg.Query != nil:
		q := *in.msg.Query
		inner, changed := editDoc(in.cmd, drop)
		if !changed {
			return nil
		}
		if w := wire.CommandName(q.Query); w == "$query" || w == "query" {
			q.Query, _ = editDoc(q.Query, func(key string, v bson.RawValue) (bson.RawValue, bool, bool) {
				if key == w {
					return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: inner}, true, false
				}
				return v, false, false
			})
		} else {
			q.Query = inner
		}
		return wire.AppendQuery(nil, h.RequestID, h.ResponseTo, &q)
	}
	return nil
}

// rewriteHelloReply maps every server address in a hello reply (hosts,
// passives, arbiters, primary, me) to the proxy listener for that server,
// opening listeners for servers it has not seen. self is the listener the
// reply is travelling through: "me" is always that one. It returns the
// re-encoded message, or nil when the reply names no server.
func (p *Proxy) rewriteHelloReply(m wire.Message, self *listener) []byte {
	var doc bson.Raw
	switch {
	case m.Msg != nil:
		doc = m.Msg.Body
	case m.Reply != nil && len(m.Reply.Documents) == 1:
		doc = m.Reply.Documents[0]
	default:
		return nil
	}
	mapped, changed := editDoc(doc, func(key string, v bson.RawValue) (bson.RawValue, bool, bool) {
		switch key {
		case "hosts", "passives", "arbiters":
			arr, ok := v.ArrayOK()
			if !ok {
				return v, false, false
			}
			vals, err := arr.Values()
			if err != nil {
				return v, false, false
			}
			out := make([]string, 0, len(vals))
			for _, ev := range vals {
				s, ok := ev.StringValueOK()
				if !ok {
					return v, false, false
				}
				out = append(out, p.mapHost(s, nil))
			}
			return stringArray(out), true, false
		case "primary", "me":
			s, ok := v.StringValueOK()
			if !ok {
				return v, false, false
			}
			if key == "me" {
				return stringValue(p.mapHost(s, self)), true, false
			}
			return stringValue(p.mapHost(s, nil)), true, false
		}
		return v, false, false
	})
	if !changed {
		return nil
	}
	h := m.Header
	if m.Msg != nil {
		mm := *m.Msg
		mm.Body = mapped
		p.stats.hellosRewritten.Add(1)
		return wire.AppendMsg(nil, h.RequestID, h.ResponseTo, &mm)
	}
	r := *m.Reply
	r.Documents = []bson.Raw{mapped}
	p.stats.hellosRewritten.Add(1)
	return wire.AppendReply(nil, h.RequestID, h.ResponseTo, &r)
}
