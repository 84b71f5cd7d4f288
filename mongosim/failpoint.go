package mongosim

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// Fail point names mongosim implements.
const (
	fpFailCommand                 = "failCommand"
	fpOnPrimaryTransactionalWrite = "onPrimaryTransactionalWrite"
	// fpFailGetMoreAfterCursorCheckout fails every getMore with
	// data.errorCode once its cursor is checked out (change stream tests).
	fpFailGetMoreAfterCursorCheckout = "failGetMoreAfterCursorCheckout"
	// fpMaxTimeAlwaysTimeOut fails every operation that has a maxTimeMS
	// deadline with MaxTimeMSExpired at its first interrupt check.
	fpMaxTimeAlwaysTimeOut = "maxTimeAlwaysTimeOut"
	// failGetMoreAfterCursorCheckoutMessage is mongod's errmsg for it.
	failGetMoreAfterCursorCheckoutMessage = "Hit the 'failGetMoreAfterCursorCheckout' failpoint"
)

type fpMode int

const (
	modeAlwaysOn fpMode = iota
	modeTimes
	modeSkip
	modeProbability
)

// failPoint is one configured fail point.
type failPoint struct {
	mode        fpMode
	remaining   int64 // modeTimes: activations left; modeSkip: matches still to skip
	probability float64
	act         fpAction
	commands    []string // failCommands
	allCommands bool     // failAllCommands
	appName     string
	threadName  string // mongod names a connection's thread "conn<connectionId>"
	namespace   string
}

// fpAction is what an activated fail point does.
type fpAction struct {
	closeConnection      bool
	errorCode            int32
	errorLabels          []string // non-nil (possibly empty) when the fail point names them
	errorExtraInfo       bson.D   // fields merged into the errorCode reply
	writeConcernError    bson.D
	blockConnection      bool
	blockTime            time.Duration
	failBeforeCommitCode int32 // onPrimaryTransactionalWrite
}

// failPoints is a set of fail points by name. A Member has one (the
// configureFailPoint command) and the Cluster has one (SetFailPoint).
type failPoints struct {
	mu      sync.Mutex
	points  map[string]*failPoint
	entered map[string]int64 // activations per name, reported as "count"
}

func newFailPoints() *failPoints {
	return &failPoints{points: make(map[string]*failPoint), entered: make(map[string]int64)}
}

// configure applies a configureFailPoint document and returns the number of
// times the fail point had activated.
func (f *failPoints) configure(cmd bson.D) (int64, error) {
	if len(cmd) == 0 || cmd[0].Key != "configureFailPoint" {
		return 0, cmderr.New(cmderr.BadValue, "fail point document must start with configureFailPoint")
	}
	name, ok := cmd[0].Value.(string)
	if !ok {
		return 0, typeErr("configureFailPoint", "string", cmd[0].Value)
	}
	switch name {
	case fpFailCommand, fpOnPrimaryTransactionalWrite, fpFailGetMoreAfterCursorCheckout, fpMaxTimeAlwaysTimeOut:
	default:
		return 0, cmderr.Unsupported("fail point " + name)
	}
	modeV, ok := lookupD(cmd, "mode")
	if !ok {
		return 0, cmderr.New(cmderr.NoSuchKey, "Missing mode argument")
	}
	fp := &failPoint{}
	off := false
	switch m := modeV.(type) {
	case string:
		switch m {
		case "alwaysOn":
			fp.mode = modeAlwaysOn
		case "off":
			off = true
		default:
			return 0, cmderr.New(cmderr.BadValue, "unknown mode: %s", m)
		}
	case bson.D:
		// As mongod: times wins over skip, which wins over
		// activationProbability (drivers send {times: n, skip: 0}).
		key := ""
		for _, k := range []string{"times", "skip", "activationProbability"} {
			if _, ok := lookupD(m, k); ok {
				key = k
				break
			}
		}
		val, _ := lookupD(m, key)
		switch key {
		case "times", "skip":
			n, ok := asInt64(val)
			if !ok || n < 0 {
				return 0, cmderr.New(cmderr.BadValue, "'%s' must be a non-negative number", key)
			}
			fp.mode, fp.remaining = modeTimes, n
			if key == "skip" {
				fp.mode = modeSkip
			} else if n == 0 {
				off = true
			}
		case "activationProbability":
			p, ok := asFloat(val)
			if !ok || p < 0 || p > 1 {
				return 0, cmderr.New(cmderr.BadValue, "activationProbability must be between 0.0 and 1.0")
			}
			fp.mode, fp.probability = modeProbability, p
		default:
			return 0, cmderr.New(cmderr.BadValue, "'mode' must be one of 'off', 'alwaysOn', 'times', and 'activationProbability'")
		}
	default:
		return 0, cmderr.New(cmderr.TypeMismatch, "'mode' must be a string or an object")
	}
	if !off {
		if err := parseFailPointData(name, fp, cmd); err != nil {
			return 0, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	count := f.entered[name]
	if off {
		delete(f.points, name)
	} else {
		f.points[name] = fp
	}
	f.entered[name] = 0
	return count, nil
}

func parseFailPointData(name string, fp *failPoint, cmd bson.D) error {
	dataV, ok := lookupD(cmd, "data")
	if !ok || dataV == nil {
		if name == fpFailCommand {
			return cmderr.New(cmderr.BadValue, "failCommand fail point requires data.failCommands")
		}
		fp.act.closeConnection = name == fpOnPrimaryTransactionalWrite // its default
		return nil
	}
	data, ok := dataV.(bson.D)
	if !ok {
		return typeErr("data", "object", dataV)
	}
	switch name {
	case fpOnPrimaryTransactionalWrite:
		return parseTransactionalWriteData(fp, data)
	case fpMaxTimeAlwaysTimeOut:
		return nil // mongod reads no data for it
	}
	for _, e := range data {
		if err := parseFailCommandField(fp, e); err != nil {
			return err
		}
	}
	if name != fpFailCommand {
		return nil // failGetMoreAfterCursorCheckout: the filters and errorCode
	}
	if len(fp.commands) == 0 && !fp.allCommands {
		return cmderr.New(cmderr.BadValue, "failCommand fail point requires data.failCommands")
	}
	if fp.act.blockConnection && fp.act.blockTime == 0 {
		if _, ok := lookupD(data, "blockTimeMS"); !ok {
			return cmderr.New(cmderr.BadValue, "blockTimeMS is required when blockConnection is true")
		}
	}
	return nil
}

func parseTransactionalWriteData(fp *failPoint, data bson.D) error {
	fp.act.closeConnection = true
	for _, e := range data {
		switch e.Key {
		case "closeConnection":
			fp.act.closeConnection = asBool(e.Value)
		case "failBeforeCommitExceptionCode":
			n, ok := asInt64(e.Value)
			if !ok {
				return typeErr("failBeforeCommitExceptionCode", "int", e.Value)
			}
			fp.act.failBeforeCommitCode = int32(n)
		default:
			return cmderr.Unsupported("onPrimaryTransactionalWrite option " + e.Key)
		}
	}
	return nil
}

// parseFailCommandField reads one field of failCommand's data (also the
// filters and errorCode of failGetMoreAfterCursorCheckout). As on mongod,
// the data is free-form: fields mongod does not read (errmsg, which
// drivers' tests send, among them) are accepted and change nothing; the
// error's message is always mongod's fixed one.
func parseFailCommandField(fp *failPoint, e bson.E) error {
	switch e.Key {
	case "failCommands":
		cmds, err := stringList("failCommands", e.Value)
		if err != nil {
			return err
		}
		fp.commands = append(fp.commands, cmds...)
	case "failAllCommands":
		fp.allCommands = true // mongod tests only that the field is present
	case "errorLabels":
		labels, err := stringList("errorLabels", e.Value)
		if err != nil {
			return err
		}
		fp.act.errorLabels = append([]string{}, labels...)
	case "appName", "namespace", "threadName":
		s, ok := e.Value.(string)
		if !ok {
			return typeErr(e.Key, "string", e.Value)
		}
		switch e.Key {
		case "appName":
			fp.appName = s
		case "namespace":
			fp.namespace = s
		default:
			fp.threadName = s
		}
	case "failInternalCommands", "failLocalClients":
		// Only internal clients (other cluster members) send internal
		// commands, and every mongosim client is a remote one: accepted,
		// never matters.
		if _, ok := e.Value.(bool); !ok {
			return typeErr(e.Key, "bool", e.Value)
		}
	case "tassert":
		if asBool(e.Value) {
			return cmderr.Unsupported("failCommand option tassert")
		}
	default:
		return parseFailCommandAction(&fp.act, e)
	}
	return nil
}

// parseFailCommandAction reads the fields that say what an activated
// failCommand does.
func parseFailCommandAction(act *fpAction, e bson.E) error {
	switch e.Key {
	case "closeConnection":
		act.closeConnection = asBool(e.Value)
	case "errorCode":
		n, ok := asInt64(e.Value)
		if !ok {
			return typeErr("errorCode", "int", e.Value)
		}
		act.errorCode = int32(n)
	case "writeConcernError", "errorExtraInfo":
		d, ok := e.Value.(bson.D)
		if !ok {
			return typeErr(e.Key, "object", e.Value)
		}
		if e.Key == "writeConcernError" {
			act.writeConcernError = d
		} else {
			act.errorExtraInfo = d
		}
	case "blockConnection":
		act.blockConnection = asBool(e.Value)
	case "blockTimeMS":
		n, ok := asInt64(e.Value)
		if !ok || n < 0 {
			return typeErr("blockTimeMS", "int", e.Value)
		}
		act.blockTime = time.Duration(n) * time.Millisecond
	}
	return nil
}

// stringList reads an array of strings.
func stringList(field string, v any) ([]string, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, typeErr(field, "array", v)
	}
	out := make([]string, 0, len(arr))
	for _, v := range arr {
		s, ok := v.(string)
		if !ok {
			return nil, typeErr(field+" element", "string", v)
		}
		out = append(out, s)
	}
	return out, nil
}

// evaluate decides whether the named fail point activates for a request
// that passes match; it consumes times/skip counts only for matching
// requests.
func (f *failPoints) evaluate(name string, c *Cluster, match func(*failPoint) bool) *fpAction {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := f.points[name]
	if fp == nil || !match(fp) {
		return nil
	}
	switch fp.mode {
	case modeTimes:
		fp.remaining--
		if fp.remaining <= 0 {
			delete(f.points, name)
		}
	case modeSkip:
		if fp.remaining > 0 {
			fp.remaining--
			return nil
		}
	case modeProbability:
		if c.randFloat() >= fp.probability {
			return nil
		}
	}
	f.entered[name]++
	act := fp.act
	return &act
}

// evalFailCommand returns the failCommand action for r: the member's own
// fail point first, then the cluster-wide one.
func (m *Member) evalFailCommand(r *request) *fpAction {
	match := func(fp *failPoint) bool { return failCommandMatches(fp, r) }
	if act := m.fails.evaluate(fpFailCommand, m.cluster, match); act != nil {
		return act
	}
	return m.cluster.fails.evaluate(fpFailCommand, m.cluster, match)
}

// failCommandMatches is mongod's failCommand filter: the command (never
// configureFailPoint), then appName, the connection's thread name and the
// command's namespace.
func failCommandMatches(fp *failPoint, r *request) bool {
	if strings.EqualFold(r.raw.Name, "configureFailPoint") {
		return false
	}
	named := fp.allCommands
	for _, n := range fp.commands {
		if strings.EqualFold(n, r.raw.Name) || strings.EqualFold(n, r.name) {
			named = true
			break
		}
	}
	return named && failPointFilters(fp, r)
}

// failPointFilters applies the appName, threadName and namespace filters
// that failCommand and failGetMoreAfterCursorCheckout share.
func failPointFilters(fp *failPoint, r *request) bool {
	if fp.appName != "" && fp.appName != r.raw.Conn.AppName() {
		return false
	}
	if fp.threadName != "" && fp.threadName != "conn"+strconv.FormatInt(r.raw.Conn.ID(), 10) {
		return false
	}
	return fp.namespace == "" || fp.namespace == commandNamespace(r)
}

// commandNamespace is the namespace mongod reports for a command: the
// collection a getMore names, else db.<the command's string value>, else
// db.$cmd for a database-level command.
func commandNamespace(r *request) string {
	field := r.raw.Name
	if strings.EqualFold(r.name, "getMore") {
		field = "collection"
	}
	if v, _ := r.get(field); v != nil {
		if s, ok := v.(string); ok {
			return r.db + "." + s
		}
	}
	return r.db + ".$cmd"
}

// evalTransactionalWrite returns the onPrimaryTransactionalWrite action for
// a retryable write on the primary.
//
// mongod enters this fail point where a retryable write is written, so a
// retry answered from the transaction history never enters it. beforeCommit
// selects the configurations that fail before the write
// (failBeforeCommitExceptionCode), evaluated before the command runs; the
// others are evaluated after it, and only if a statement executed.
func (m *Member) evalTransactionalWrite(beforeCommit bool) *fpAction {
	match := func(fp *failPoint) bool { return (fp.act.failBeforeCommitCode != 0) == beforeCommit }
	if act := m.fails.evaluate(fpOnPrimaryTransactionalWrite, m.cluster, match); act != nil {
		return act
	}
	return m.cluster.fails.evaluate(fpOnPrimaryTransactionalWrite, m.cluster, match)
}

// evalGetMoreAfterCheckout returns the failGetMoreAfterCursorCheckout
// action for a getMore whose cursor was just checked out. As on mongod,
// failCommand's appName, threadName and namespace filters apply.
func (m *Member) evalGetMoreAfterCheckout(r *request) *fpAction {
	match := func(fp *failPoint) bool { return failPointFilters(fp, r) }
	if act := m.fails.evaluate(fpFailGetMoreAfterCursorCheckout, m.cluster, match); act != nil {
		return act
	}
	return m.cluster.fails.evaluate(fpFailGetMoreAfterCursorCheckout, m.cluster, match)
}

// maxTimeAlwaysTimesOut reports whether the maxTimeAlwaysTimeOut fail
// point fails r: the member's own or the cluster-wide one.
func (m *Member) maxTimeAlwaysTimesOut(r *request) bool {
	return maxTimeAlwaysTimesOut(m.fails, m.cluster, r) || maxTimeAlwaysTimesOut(m.cluster.fails, m.cluster, r)
}

// maxTimeAlwaysTimesOut reports whether the maxTimeAlwaysTimeOut fail
// point of fails fails r. mongod fails an operation with a deadline at its
// first interrupt check; a getMore's maxTimeMS is no deadline (an awaitData
// cursor's await time, refused on others), so a getMore is never failed.
// Nor is a hello: the official Go driver's monitors send isMaster with a
// maxTimeMS, and failing them would fail the deployment's monitoring, not
// the operation under test (it consumed a `times` activation meant for the
// test's find).
func maxTimeAlwaysTimesOut(fails *failPoints, c *Cluster, r *request) bool {
	if limit, _ := maxTimeArg(r); limit <= 0 || r.name == "getMore" || isHelloName(r.name) {
		return false
	}
	return fails.evaluate(fpMaxTimeAlwaysTimeOut, c, func(*failPoint) bool { return true }) != nil
}

// configureFailPoint is the command: admin only, on this member.
func configureFailPointCmd(r *request) (bson.D, error) {
	if r.db != "admin" {
		return nil, cmderr.New(cmderr.Unauthorized, "configureFailPoint may only be run against the admin database.")
	}
	count, err := r.member.fails.configure(r.cmd)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "count", Value: count}, {Key: "ok", Value: 1.0}}, nil
}

func init() {
	register(&command{name: "configureFailPoint", run: configureFailPointCmd, exempt: true})
}
