package mongosim

import (
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Version is the MongoDB version mongosim claims.
const Version = "8.0.0"

// setParameter / getParameter names for the overload knobs. The first four
// follow MongoDB 8.2's ingress admission parameters; the burst is expressed
// in seconds of the rate, as MongoDB does.
const (
	paramRateLimiterEnabled = "ingressRequestRateLimiterEnabled"         // bool
	paramRatePerSec         = "ingressRequestAdmissionRatePerSec"        // number; 0 = off
	paramBurstSecs          = "ingressRequestAdmissionBurstCapacitySecs" // number of seconds of the rate
	paramBaseBackoffMS      = "externalClientBaseBackoffMS"              // baseBackoffMS on overload errors
	paramMaxConns           = "maxIncomingConnections"                   // per member; 0 = unlimited
	paramTxnLifetime        = "transactionLifetimeLimitSeconds"
	// mongosim's own: the bucket capacity in requests.
	paramBurstCapacity = "ingressRequestRateLimiterBurstCapacity"
	// The connection establishment rate limiter, as MongoDB 8.2 names it;
	// a rate of 0 turns it off.
	paramConnRatePerSec = "ingressConnectionEstablishmentRatePerSec"
	paramConnBurstSecs  = "ingressConnectionEstablishmentBurstCapacitySecs"
	paramConnMaxQueue   = "ingressConnectionEstablishmentMaxQueueDepth"
	paramConnEnabled    = "ingressConnectionEstablishmentRateLimiterEnabled" // bool
	// The TTL monitor's (ttl.go).
	paramTTLSleepSecs = "ttlMonitorSleepSecs"
	paramTTLEnabled   = "ttlMonitorEnabled"
)

func okReply() bson.D { return bson.D{{Key: "ok", Value: 1.0}} }

func pingCmd(*request) (bson.D, error) { return okReply(), nil }

func buildInfoCmd(*request) (bson.D, error) {
	return bson.D{
		{Key: "version", Value: Version},
		{Key: "gitVersion", Value: "mongosim"},
		{Key: "modules", Value: bson.A{}},
		{Key: "allocator", Value: "system"},
		{Key: "javascriptEngine", Value: "mozjs"},
		{Key: "sysInfo", Value: "deprecated"},
		{Key: "versionArray", Value: bson.A{int32(8), int32(0), int32(0), int32(0)}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(maxBSONObjectSize)},
		{Key: "storageEngines", Value: bson.A{"inMemory"}},
		{Key: "openssl", Value: bson.D{{Key: "running", Value: "disabled"}, {Key: "compiled", Value: "disabled"}}},
		{Key: "buildEnvironment", Value: bson.D{
			{Key: "distmod", Value: ""},
			{Key: "distarch", Value: runtime.GOARCH},
			{Key: "target_arch", Value: runtime.GOARCH},
			{Key: "target_os", Value: runtime.GOOS},
		}},
		{Key: "ok", Value: 1.0},
	}, nil
}

// Session bookkeeping commands: endSessions drops sessions from the member's
// local session cache ($listLocalSessions); the retryable-write table, as in
// MongoDB, outlives it.
// Killing (or ending) sessions aborts their open transactions, as on mongod.
func sessionsCmd(r *request) (bson.D, error) {
	switch r.name {
	case "endSessions", "killSessions":
		if ids, ok := r.get(r.name); ok {
			if a, ok := ids.(bson.A); ok {
				if r.name == "endSessions" {
					r.member.localSessions.end(a)
				}
				r.cluster.abortSessionTransactions(a, "the session was "+map[string]string{"endSessions": "ended", "killSessions": "killed"}[r.name])
			}
		}
	case "killAllSessions", "killAllSessionsByPattern":
		r.cluster.abortAllTransactions("the session was killed")
	}
	return okReply(), nil
}

func adminOnly(r *request) error {
	if r.db != "admin" {
		return cmderr.New(cmderr.Unauthorized, "%s may only be run against the admin database.", r.name)
	}
	return nil
}

// setParameterCmd sets run-time knobs (parameterSetters); its reply's was
// is the previous value of the last one set.
func setParameterCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	var was any
	n := 0
	for _, e := range r.cmd[1:] {
		if isGenericArg(e.Key) {
			continue
		}
		n++
		set, ok := parameterSetters[e.Key]
		if !ok {
			return nil, cmderr.New(cmderr.InvalidOptions, "attempted to set unrecognized parameter [%s], use help:true to see options ", e.Key)
		}
		p := &paramChange{r: r, l: r.cluster.limiter, key: e.Key, value: e.Value, was: was}
		p.cur, _ = p.l.options()
		if err := set(p); err != nil {
			return nil, err
		}
		was = p.was
	}
	if n == 0 {
		return nil, cmderr.New(cmderr.InvalidOptions, "no option found to set, use help:true to see options ")
	}
	return bson.D{{Key: "was", Value: was}, {Key: "ok", Value: 1.0}}, nil
}

// paramChange is one parameter of a setParameter command.
type paramChange struct {
	r     *request
	l     *limiter
	key   string
	value any
	cur   LimiterOptions // the limiter's options before this change
	// was is the previous value the reply reports. A setter that cannot
	// tell it (a burst in seconds while the rate is 0) leaves it unchanged.
	was any
}

func (p *paramChange) nonNegativeFloat() (float64, error) {
	f, ok := asFloat(p.value)
	if !ok || f < 0 {
		return 0, cmderr.New(cmderr.BadValue, "%s must be a non-negative number", p.key)
	}
	return f, nil
}

func (p *paramChange) positiveFloat() (float64, error) {
	f, ok := asFloat(p.value)
	if !ok || f <= 0 {
		return 0, cmderr.New(cmderr.BadValue, "%s must be a positive number", p.key)
	}
	return f, nil
}

func (p *paramChange) nonNegativeInt() (int64, error) {
	n, ok := asInt64(p.value)
	if !ok || n < 0 {
		return 0, cmderr.New(cmderr.BadValue, "%s must be a non-negative number", p.key)
	}
	return n, nil
}

// parameterSetters validate and apply each settable parameter, recording
// its previous value in was.
var parameterSetters = map[string]func(p *paramChange) error{
	paramRateLimiterEnabled: func(p *paramChange) error {
		_, p.was = p.l.options()
		p.l.setEnabled(asBool(p.value))
		return nil
	},
	paramRatePerSec: func(p *paramChange) error {
		f, err := p.nonNegativeFloat()
		if err != nil {
			return err
		}
		p.was = p.cur.RequestsPerSecond
		p.l.setRate(f)
		return nil
	},
	paramBurstSecs: func(p *paramChange) error {
		f, err := p.positiveFloat()
		if err != nil {
			return err
		}
		if p.cur.RequestsPerSecond > 0 {
			p.was = float64(p.cur.Burst) / p.cur.RequestsPerSecond
		}
		p.l.setBurst(f * p.cur.RequestsPerSecond)
		return nil
	},
	paramBurstCapacity: func(p *paramChange) error {
		f, err := p.positiveFloat()
		if err != nil {
			return err
		}
		p.was = int32(p.cur.Burst)
		p.l.setBurst(f)
		return nil
	},
	paramBaseBackoffMS: func(p *paramChange) error {
		n, err := p.nonNegativeInt()
		if err != nil {
			return err
		}
		p.was = p.cur.BaseBackoffMS
		p.l.setBackoff(int32(n))
		return nil
	},
	paramTxnLifetime: func(p *paramChange) error {
		n, ok := asInt64(p.value)
		if !ok || n < 1 {
			return cmderr.New(cmderr.BadValue, "%s must be at least 1", p.key)
		}
		p.was = int32(p.r.cluster.txnLifetimeSecs.Swap(n))
		return nil
	},
	paramMaxConns: func(p *paramChange) error {
		n, err := p.nonNegativeInt()
		if err != nil {
			return err
		}
		p.was = int32(p.cur.MaxConnections)
		p.l.setMaxConnections(int(n))
		return nil
	},
	paramConnEnabled: func(p *paramChange) error {
		p.was = p.l.setConnEnabled(asBool(p.value))
		return nil
	},
	paramTTLSleepSecs: func(p *paramChange) error {
		n, ok := asInt64(p.value)
		if !ok || n <= 0 {
			return cmderr.New(cmderr.BadValue, "Invalid value for parameter %s: %v is not greater than 0", p.key, p.value)
		}
		p.was = int32(p.r.cluster.ttl.setInterval(time.Duration(n)*time.Second) / time.Second)
		return nil
	},
	paramTTLEnabled: func(p *paramChange) error {
		p.was = !p.r.cluster.ttl.disabled.Swap(!asBool(p.value))
		return nil
	},
	paramConnRatePerSec: func(p *paramChange) error {
		return p.setConnLimit(func(next *LimiterOptions, f float64) {
			p.was, next.ConnectionsPerSecond = p.cur.ConnectionsPerSecond, f
		})
	},
	paramConnBurstSecs: func(p *paramChange) error {
		return p.setConnLimit(func(next *LimiterOptions, f float64) {
			if p.cur.ConnectionsPerSecond > 0 {
				p.was = float64(p.cur.ConnectionBurst) / p.cur.ConnectionsPerSecond
			}
			next.ConnectionBurst = int(f * p.cur.ConnectionsPerSecond)
		})
	},
	paramConnMaxQueue: func(p *paramChange) error {
		return p.setConnLimit(func(next *LimiterOptions, f float64) {
			p.was, next.ConnectionQueueDepth = int32(p.cur.ConnectionQueueDepth), int(f)
		})
	},
}

// setConnLimit validates a connection-establishment limit, lets change put
// it into a copy of the limiter's options, and applies the copy.
func (p *paramChange) setConnLimit(change func(next *LimiterOptions, f float64)) error {
	f, err := p.nonNegativeFloat()
	if err != nil {
		return err
	}
	next := p.cur
	change(&next, f)
	p.l.set(next)
	return nil
}

func getParameterCmd(r *request) (bson.D, error) {
	if err := adminOnly(r); err != nil {
		return nil, err
	}
	o, enabled := r.cluster.limiter.options()
	burstSecs := 0.0
	if o.RequestsPerSecond > 0 {
		burstSecs = float64(o.Burst) / o.RequestsPerSecond
	}
	all := bson.D{
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "8.0"}}},
		{Key: paramRateLimiterEnabled, Value: enabled && o.RequestsPerSecond > 0},
		{Key: paramRatePerSec, Value: o.RequestsPerSecond},
		{Key: paramBurstSecs, Value: burstSecs},
		{Key: paramBurstCapacity, Value: int32(o.Burst)},
		{Key: paramBaseBackoffMS, Value: o.BaseBackoffMS},
		{Key: paramMaxConns, Value: int32(o.MaxConnections)},
		{Key: paramConnRatePerSec, Value: o.ConnectionsPerSecond},
		{Key: paramConnMaxQueue, Value: int32(o.ConnectionQueueDepth)},
		{Key: paramConnEnabled, Value: r.cluster.limiter.connEnabled()},
		{Key: paramTxnLifetime, Value: int32(r.cluster.txnLifetimeSecs.Load())},
		{Key: paramTTLSleepSecs, Value: int32(time.Duration(r.cluster.ttl.interval.Load()) / time.Second)},
		{Key: paramTTLEnabled, Value: !r.cluster.ttl.disabled.Load()},
	}
	v, _ := r.get("getParameter")
	if s, ok := v.(string); ok && s == "*" {
		return append(all, bson.E{Key: "ok", Value: 1.0}), nil
	}
	var out bson.D
	for _, e := range r.cmd[1:] {
		if isGenericArg(e.Key) {
			continue
		}
		val, ok := lookupD(all, e.Key)
		if !ok {
			return nil, cmderr.New(cmderr.InvalidOptions, "no option found to get")
		}
		out = append(out, bson.E{Key: e.Key, Value: val})
	}
	if len(out) == 0 {
		return nil, cmderr.New(cmderr.InvalidOptions, "no option found to get")
	}
	return append(out, bson.E{Key: "ok", Value: 1.0}), nil
}

// isGenericArg reports the arguments any command may carry.
func isGenericArg(k string) bool {
	switch k {
	case "$db", "lsid", "txnNumber", "$clusterTime", "$readPreference", "readConcern", "writeConcern",
		"maxTimeMS", "comment", "apiVersion", "apiStrict", "apiDeprecationErrors", "$audit", "autocommit",
		"startTransaction", "help":
		return true
	}
	return false
}

func serverStatusCmd(r *request) (bson.D, error) {
	c := r.cluster
	st := c.Stats()
	host, _ := os.Hostname()
	up := r.now.Sub(c.started)
	var current, bytesIn, bytesOut int64
	for _, m := range c.Members() {
		current += m.conns.Load()
		in, out := m.srv.NetworkBytes()
		bytesIn, bytesOut = bytesIn+in, bytesOut+out
	}
	available := int64(math.MaxInt32)
	if lim := c.limiter.maxConnections(); lim > 0 {
		available = max(int64(lim)*int64(len(c.Members()))-current, 0)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	const mb = 1 << 20
	d := bson.D{
		{Key: "host", Value: host},
		{Key: "version", Value: Version},
		{Key: "process", Value: "mongod"},
		{Key: "service", Value: bson.A{"shard"}},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: math.Floor(up.Seconds())},
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up.Seconds())},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(r.now)},
		{Key: "connections", Value: bson.D{
			{Key: "current", Value: int32(current)},
			{Key: "available", Value: int32(available)},
			{Key: "totalCreated", Value: st.ConnsAccepted},
			{Key: "rejected", Value: st.ConnsRejected},
			{Key: "active", Value: int32(c.adm.ops.active())},
		}},
		{Key: "mem", Value: bson.D{
			{Key: "bits", Value: int32(strconv.IntSize)},
			{Key: "resident", Value: int32((ms.Sys - ms.HeapReleased) / mb)},
			{Key: "virtual", Value: int32(ms.Sys / mb)},
			{Key: "supported", Value: true},
		}},
		{Key: "network", Value: bson.D{
			{Key: "bytesIn", Value: bytesIn},
			{Key: "bytesOut", Value: bytesOut},
			{Key: "numRequests", Value: st.Commands},
		}},
		{Key: "opcounters", Value: c.adm.opc.doc()},
	}
	if c.setName != "" {
		d = append(d, bson.E{Key: "repl", Value: replSetInfo(r)})
	}
	return append(d,
		bson.E{Key: "metrics", Value: c.ttlMetrics()},
		bson.E{Key: "transactions", Value: bson.D{
			{Key: "currentOpen", Value: r.cluster.data.clock.active.Load()},
			{Key: "totalStarted", Value: st.TxnStarted},
			{Key: "totalCommitted", Value: st.TxnCommitted},
			{Key: "totalAborted", Value: st.TxnAborted},
		}},
		bson.E{Key: "mongosim", Value: bson.D{
			{Key: "commands", Value: st.Commands},
			{Key: "admitted", Value: st.Admitted},
			{Key: "rejected", Value: st.Rejected},
			{Key: "failPointsFired", Value: st.FailPointsFired},
			{Key: "replayedStatements", Value: st.Replayed},
			{Key: "hangups", Value: st.Hangups},
			{Key: "stepDowns", Value: st.StepDowns},
		}},
		bson.E{Key: "ok", Value: 1.0},
	), nil
}

func whatsmyuriCmd(r *request) (bson.D, error) {
	return bson.D{{Key: "you", Value: r.raw.Conn.RemoteAddr().String()}, {Key: "ok", Value: 1.0}}, nil
}

// getCmdLineOptsCmd answers as a mongod started with test commands
// enabled, which mongosim is (configureFailPoint works): drivers' test
// suites read parsed.setParameter.enableTestCommands to decide whether
// to run their fail-point tests.
func getCmdLineOptsCmd(r *request) (bson.D, error) {
	argv := bson.A{"mongosim", "--bind_ip", r.cluster.opts.Host}
	parsed := bson.D{{Key: "net", Value: bson.D{{Key: "bindIp", Value: r.cluster.opts.Host}}}}
	if r.cluster.setName != "" {
		argv = append(argv, "--replSet", r.cluster.setName)
		parsed = append(parsed, bson.E{Key: "replication", Value: bson.D{{Key: "replSet", Value: r.cluster.setName}}})
	}
	argv = append(argv, "--setParameter", "enableTestCommands=1")
	parsed = append(parsed, bson.E{Key: "setParameter", Value: bson.D{{Key: "enableTestCommands", Value: "1"}}})
	return bson.D{{Key: "argv", Value: argv}, {Key: "parsed", Value: parsed}, {Key: "ok", Value: 1.0}}, nil
}

func hostInfoCmd(r *request) (bson.D, error) {
	host, _ := os.Hostname()
	return bson.D{
		{Key: "system", Value: bson.D{
			{Key: "currentTime", Value: bson.NewDateTimeFromTime(r.now)},
			{Key: "hostname", Value: host},
			{Key: "cpuAddrSize", Value: int32(strconv.IntSize)},
			{Key: "numCores", Value: int32(runtime.NumCPU())},
			{Key: "cpuArch", Value: runtime.GOARCH},
			{Key: "numaEnabled", Value: false},
		}},
		{Key: "os", Value: bson.D{{Key: "type", Value: map[string]string{"linux": "Linux", "darwin": "Darwin", "windows": "Windows"}[runtime.GOOS]}, {Key: "name", Value: runtime.GOOS}}},
		{Key: "extra", Value: bson.D{}},
		{Key: "ok", Value: 1.0},
	}, nil
}

func listCommandsCmd(*request) (bson.D, error) {
	names := make([]string, 0, len(commands))
	seen := map[string]bool{}
	for _, c := range commands {
		if !seen[c.name] {
			seen[c.name] = true
			names = append(names, c.name)
		}
	}
	sort.Strings(names)
	var list bson.D
	for _, n := range names {
		c := lookupCommand(n)
		list = append(list, bson.E{Key: n, Value: bson.D{
			{Key: "help", Value: ""},
			{Key: "requiresAuth", Value: !c.noAuth},
			{Key: "secondaryOk", Value: !c.write},
			{Key: "adminOnly", Value: false},
		}})
	}
	return bson.D{{Key: "commands", Value: list}, {Key: "ok", Value: 1.0}}, nil
}

func unsupportedCmd(what string) func(*request) (bson.D, error) {
	return func(*request) (bson.D, error) { return nil, cmderr.Unsupported(what) }
}

func init() {
	register(
		&command{name: "ping", run: pingCmd, noAuth: true},
		&command{name: "buildInfo", run: buildInfoCmd, noAuth: true},
		&command{name: "endSessions", run: sessionsCmd},
		&command{name: "refreshSessions", run: sessionsCmd},
		&command{name: "killSessions", run: sessionsCmd},
		&command{name: "killAllSessions", run: sessionsCmd},
		&command{name: "killAllSessionsByPattern", run: sessionsCmd},
		&command{name: "setParameter", run: setParameterCmd, exempt: true},
		&command{name: "getParameter", run: getParameterCmd, exempt: true},
		&command{name: "serverStatus", run: serverStatusCmd},
		&command{name: "whatsmyuri", run: whatsmyuriCmd},
		&command{name: "getCmdLineOpts", run: getCmdLineOptsCmd},
		&command{name: "hostInfo", run: hostInfoCmd},
		&command{name: "listCommands", run: listCommandsCmd},
		&command{name: "getLog", run: getLogCmd},
	)
}
