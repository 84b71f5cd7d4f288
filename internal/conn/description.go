package conn

import (
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/bsonnum"
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
	// IsReplicaSet is set by a replica set member not yet initiated (an
	// RSGhost in SDAM's terms).
	IsReplicaSet bool
	// Msg is "isdbgrid" when the server is a mongos.
	Msg string

	MinWireVersion int32
	MaxWireVersion int32

	MaxBSONObjectSize   int32
	MaxMessageSizeBytes int32
	MaxWriteBatchSize   int32

	LogicalSessionTimeoutMinutes *int64
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

	// TopologyVersion is nil if absent or malformed.
	TopologyVersion *TopologyVersion
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

// TopologyVersion orders hello replies and state-change errors from one
// server process.
type TopologyVersion struct {
	ProcessID bson.ObjectID
	Counter   int64
}

// IsMongos reports whether the server said it is a mongos.
func (d Description) IsMongos() bool { return d.Msg == "isdbgrid" }

// ParseDescription reads a hello or legacy hello reply. It is the one
// parser of hello replies: the handshake and the topology monitor both use
// it. A malformed document is an error; fields of the wrong type are
// ignored rather than failing, as the description is advisory and SDAM
// treats missing fields as absent. Where the specifications are silent it
// reads values as mongod itself would:
//   - isWritablePrimary wins over the legacy ismaster, whichever comes first
//     (SDAM: check isWritablePrimary, fall back to ismaster);
//   - a boolean field may be any BSON number, non-zero meaning true (0.5 too);
//   - an integer field may be an int32, an int64 or a double (truncated);
//     a value outside the field's range counts as absent, not wrapped.
//
// It does not look at ok: callers get a *CommandError for {ok: 0} from Send.
func ParseDescription(raw bson.Raw) (Description, error) {
	d := Description{Raw: raw}
	if err := raw.Validate(); err != nil {
		return d, err
	}
	elems, err := raw.Elements()
	if err != nil {
		return d, err
	}
	writableSeen := false
	for _, e := range elems {
		v := e.Value()
		switch k := e.Key(); k {
		case "isWritablePrimary":
			d.IsWritablePrimary, writableSeen = truthy(v), true
		case "ismaster": // the legacy name, when the new one is absent
			if !writableSeen {
				d.IsWritablePrimary = truthy(v)
			}
		default:
			if set := descriptionFields[k]; set != nil {
				set(&d, v)
			}
		}
	}
	return d, nil
}

// descriptionFields sets the Description field of each hello reply field
// (but isWritablePrimary and ismaster, which depend on each other); other
// fields are ignored.
var descriptionFields = map[string]func(d *Description, v bson.RawValue){
	"secondary":    func(d *Description, v bson.RawValue) { d.Secondary = truthy(v) },
	"arbiterOnly":  func(d *Description, v bson.RawValue) { d.ArbiterOnly = truthy(v) },
	"hidden":       func(d *Description, v bson.RawValue) { d.Hidden = truthy(v) },
	"passive":      func(d *Description, v bson.RawValue) { d.Passive = truthy(v) },
	"readOnly":     func(d *Description, v bson.RawValue) { d.ReadOnly = truthy(v) },
	"helloOk":      func(d *Description, v bson.RawValue) { d.HelloOK = truthy(v) },
	"isreplicaset": func(d *Description, v bson.RawValue) { d.IsReplicaSet = truthy(v) },
	"msg":          func(d *Description, v bson.RawValue) { d.Msg, _ = v.StringValueOK() },

	"minWireVersion":      func(d *Description, v bson.RawValue) { d.MinWireVersion = int32Value(v) },
	"maxWireVersion":      func(d *Description, v bson.RawValue) { d.MaxWireVersion = int32Value(v) },
	"maxBsonObjectSize":   func(d *Description, v bson.RawValue) { d.MaxBSONObjectSize = int32Value(v) },
	"maxMessageSizeBytes": func(d *Description, v bson.RawValue) { d.MaxMessageSizeBytes = int32Value(v) },
	"maxWriteBatchSize":   func(d *Description, v bson.RawValue) { d.MaxWriteBatchSize = int32Value(v) },
	"logicalSessionTimeoutMinutes": func(d *Description, v bson.RawValue) {
		d.LogicalSessionTimeoutMinutes = int64Ptr(v)
	},
	"connectionId": func(d *Description, v bson.RawValue) { d.ConnectionID = int64Ptr(v) },

	"setName":    func(d *Description, v bson.RawValue) { d.SetName, _ = v.StringValueOK() },
	"setVersion": func(d *Description, v bson.RawValue) { d.SetVersion = int64Ptr(v) },
	"electionId": func(d *Description, v bson.RawValue) {
		if oid, ok := v.ObjectIDOK(); ok {
			d.ElectionID = &oid
		}
	},
	"me":       func(d *Description, v bson.RawValue) { d.Me, _ = v.StringValueOK() },
	"primary":  func(d *Description, v bson.RawValue) { d.Primary, _ = v.StringValueOK() },
	"hosts":    func(d *Description, v bson.RawValue) { d.Hosts = stringArray(v) },
	"passives": func(d *Description, v bson.RawValue) { d.Passives = stringArray(v) },
	"arbiters": func(d *Description, v bson.RawValue) { d.Arbiters = stringArray(v) },
	"tags": func(d *Description, v bson.RawValue) {
		if tags, ok := stringMap(v); ok {
			d.Tags = tags
		}
	},
	"topologyVersion": func(d *Description, v bson.RawValue) { d.TopologyVersion = ParseTopologyVersion(v) },
	"lastWrite": func(d *Description, v bson.RawValue) {
		if t, ok := lastWriteDate(v); ok {
			d.LastWriteDate = t
		}
	},

	"compression": func(d *Description, v bson.RawValue) {
		if cs := stringArray(v); len(cs) > 0 {
			d.Compression = cs[0]
		}
	},
	"saslSupportedMechs": func(d *Description, v bson.RawValue) { d.SaslSupportedMechs = stringArray(v) },
	"serviceId": func(d *Description, v bson.RawValue) {
		if oid, ok := v.ObjectIDOK(); ok {
			d.ServiceID = &oid
		}
	},
	"speculativeAuthenticate": func(d *Description, v bson.RawValue) {
		if doc, ok := v.DocumentOK(); ok {
			d.SpeculativeAuthenticate = doc
		}
	},
}

// stringMap reads a document of strings (a member's tags), skipping values
// that are not strings; ok is false if v is not a document.
func stringMap(v bson.RawValue) (map[string]string, bool) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, false
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, false
	}
	m := make(map[string]string, len(elems))
	for _, e := range elems {
		if s, ok := e.Value().StringValueOK(); ok {
			m[e.Key()] = s
		}
	}
	return m, true
}

// lastWriteDate reads lastWrite.lastWriteDate, in UTC.
func lastWriteDate(v bson.RawValue) (time.Time, bool) {
	doc, ok := v.DocumentOK()
	if !ok {
		return time.Time{}, false
	}
	lw, err := doc.LookupErr("lastWriteDate")
	if err != nil {
		return time.Time{}, false
	}
	dt, ok := lw.DateTimeOK()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(dt).UTC(), true
}

// ParseTopologyVersion reads a {processId, counter} document, as found in
// hello replies and state-change errors; nil if v is not one.
func ParseTopologyVersion(v bson.RawValue) *TopologyVersion {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil
	}
	// Lookup gives an empty value for an absent field, which no OK accessor
	// accepts.
	oid, ok := doc.Lookup("processId").ObjectIDOK()
	if !ok {
		return nil
	}
	n, ok := bsonnum.Int64(doc.Lookup("counter"))
	if !ok {
		return nil
	}
	return &TopologyVersion{ProcessID: oid, Counter: n}
}

// truthy is a field's value as a condition, as mongod reads one: a boolean,
// or any non-zero number.
func truthy(v bson.RawValue) bool {
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	if d, ok := v.Decimal128OK(); ok {
		return !d.IsZero()
	}
	n, ok := v.AsFloat64OK()
	return ok && n != 0
}

// int32Value is an int32 field's value, 0 (absent) when it is not a number
// or does not fit.
func int32Value(v bson.RawValue) int32 {
	n, ok := bsonnum.Int64(v)
	if !ok || n > math.MaxInt32 || n < math.MinInt32 {
		return 0
	}
	return int32(n)
}

func int64Ptr(v bson.RawValue) *int64 {
	if n, ok := bsonnum.Int64(v); ok {
		return &n
	}
	return nil
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
