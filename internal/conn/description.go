package conn

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Description is what the server's hello reply said about it. Numeric fields
// accept any BSON number type, as servers and proxies differ in what they send.
type Description struct {
	Raw bson.Raw // the whole hello reply (owned by the Description)

	IsWritablePrimary bool
	Secondary         bool
	ArbiterOnly       bool
	Hidden            bool
	Passive           bool
	ReadOnly          bool
	HelloOK           bool
	// Msg is "isdbgrid" when the server is a mongos.
	Msg string

	MinWireVersion int32
	MaxWireVersion int32

	MaxBSONObjectSize   int32
	MaxMessageSizeBytes int32
	MaxWriteBatchSize   int32

	LogicalSessionTimeoutMinutes *int32
	ConnectionID                 *int64

	SetName    string
	SetVersion *int64
	ElectionID *bson.ObjectID
	Me         string
	Primary    string
	Hosts      []string
	Passives   []string
	Arbiters   []string
	Tags       map[string]string

	// TopologyVersion is the raw {processId, counter} document, nil if absent.
	TopologyVersion bson.Raw
	LastWriteDate   time.Time

	// Compression is the compressor both sides agreed on ("" for none).
	Compression        string
	SaslSupportedMechs []string
	// SpeculativeAuthenticate is the server's answer to a speculative first
	// authentication step, nil if it did not take it.
	SpeculativeAuthenticate bson.Raw
	// ServiceID identifies the service behind a load balancer that the
	// connection reached; nil when not load balanced.
	ServiceID *bson.ObjectID
}

// IsMongos reports whether the server said it is a mongos.
func (d Description) IsMongos() bool { return d.Msg == "isdbgrid" }

// parseDescription reads a hello reply. Fields of the wrong type are ignored
// rather than failing the handshake: the description is advisory and SDAM
// treats missing fields as absent.
func parseDescription(raw bson.Raw) (Description, error) {
	d := Description{Raw: raw}
	elems, err := raw.Elements()
	if err != nil {
		return d, err
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "isWritablePrimary", "ismaster":
			d.IsWritablePrimary = truthy(v)
		case "secondary":
			d.Secondary = truthy(v)
		case "arbiterOnly":
			d.ArbiterOnly = truthy(v)
		case "hidden":
			d.Hidden = truthy(v)
		case "passive":
			d.Passive = truthy(v)
		case "readOnly":
			d.ReadOnly = truthy(v)
		case "helloOk":
			d.HelloOK = truthy(v)
		case "msg":
			d.Msg, _ = v.StringValueOK()
		case "minWireVersion":
			d.MinWireVersion = int32Value(v)
		case "maxWireVersion":
			d.MaxWireVersion = int32Value(v)
		case "maxBsonObjectSize":
			d.MaxBSONObjectSize = int32Value(v)
		case "maxMessageSizeBytes":
			d.MaxMessageSizeBytes = int32Value(v)
		case "maxWriteBatchSize":
			d.MaxWriteBatchSize = int32Value(v)
		case "logicalSessionTimeoutMinutes":
			if n, ok := v.AsInt64OK(); ok {
				m := int32(n)
				d.LogicalSessionTimeoutMinutes = &m
			}
		case "connectionId":
			if n, ok := v.AsInt64OK(); ok {
				d.ConnectionID = &n
			}
		case "setName":
			d.SetName, _ = v.StringValueOK()
		case "setVersion":
			if n, ok := v.AsInt64OK(); ok {
				d.SetVersion = &n
			}
		case "electionId":
			if oid, ok := v.ObjectIDOK(); ok {
				d.ElectionID = &oid
			}
		case "me":
			d.Me, _ = v.StringValueOK()
		case "primary":
			d.Primary, _ = v.StringValueOK()
		case "hosts":
			d.Hosts = stringArray(v)
		case "passives":
			d.Passives = stringArray(v)
		case "arbiters":
			d.Arbiters = stringArray(v)
		case "tags":
			if doc, ok := v.DocumentOK(); ok {
				if tes, err := doc.Elements(); err == nil {
					d.Tags = make(map[string]string, len(tes))
					for _, te := range tes {
						if s, ok := te.Value().StringValueOK(); ok {
							d.Tags[te.Key()] = s
						}
					}
				}
			}
		case "topologyVersion":
			if doc, ok := v.DocumentOK(); ok {
				d.TopologyVersion = doc
			}
		case "lastWrite":
			if doc, ok := v.DocumentOK(); ok {
				if lw, err := doc.LookupErr("lastWriteDate"); err == nil {
					if dt, ok := lw.DateTimeOK(); ok {
						d.LastWriteDate = time.UnixMilli(dt).UTC()
					}
				}
			}
		case "compression":
			if cs := stringArray(v); len(cs) > 0 {
				d.Compression = cs[0]
			}
		case "saslSupportedMechs":
			d.SaslSupportedMechs = stringArray(v)
		case "serviceId":
			if oid, ok := v.ObjectIDOK(); ok {
				d.ServiceID = &oid
			}
		case "speculativeAuthenticate":
			if doc, ok := v.DocumentOK(); ok {
				d.SpeculativeAuthenticate = doc
			}
		}
	}
	return d, nil
}

func truthy(v bson.RawValue) bool {
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	n, ok := v.AsFloat64OK()
	return ok && n != 0
}

func int32Value(v bson.RawValue) int32 {
	n, ok := v.AsInt64OK()
	if !ok {
		if f, fok := v.AsFloat64OK(); fok {
			n = int64(f)
		}
	}
	if n > 1<<31-1 || n < -1<<31 {
		return 0
	}
	return int32(n)
}

func stringArray(v bson.RawValue) []string {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(vals))
	for _, x := range vals {
		if s, ok := x.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}
