package mongosim

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

const (
	mechSHA256 = "SCRAM-SHA-256"
	mechSHA1   = "SCRAM-SHA-1"
	mechPlain  = "PLAIN"
	authDB     = "admin" // the one user lives in admin
	// MongoDB's default iteration counts.
	itersSHA256 = 15000
	itersSHA1   = 10000
)

// authenticator holds the one user and its SCRAM servers. The stored keys
// are derived lazily (PBKDF2 is slow) on the first authentication.
type authenticator struct {
	user, password string
	once           sync.Once
	servers        map[string]*scram.Server
	initErr        error
	// trusted, when set, reports connections that need no authentication:
	// a mongos router's own connections to the shard (router.go).
	trusted func(*blackpipe.Conn) bool
}

// authKey is the blackpipe.Conn value holding a connection's *authState.
type authKey struct{}

// authState is one connection's authentication progress.
type authState struct {
	mu             sync.Mutex
	user           string // set once authenticated
	conv           *scram.ServerConversation
	convID         int32
	skipEmpty      bool
	awaitingEmpty  bool // server-final sent without skipEmptyExchange
	conversationNo int32
}

func newAuthenticator(o AuthOptions) *authenticator {
	return &authenticator{user: o.Username, password: o.Password}
}

func (a *authenticator) init() error {
	a.once.Do(func() {
		a.servers = make(map[string]*scram.Server)
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			a.initErr = err
			return
		}
		c256, err := scram.SHA256.NewClient(a.user, a.password, "")
		if err != nil {
			a.initErr = err
			return
		}
		h := md5.Sum([]byte(a.user + ":mongo:" + a.password))
		c1, err := scram.SHA1.NewClientUnprepped(a.user, hex.EncodeToString(h[:]), "")
		if err != nil {
			a.initErr = err
			return
		}
		for _, x := range []struct {
			mech   string
			hash   scram.HashGeneratorFcn
			client *scram.Client
			iters  int
		}{{mechSHA256, scram.SHA256, c256, itersSHA256}, {mechSHA1, scram.SHA1, c1, itersSHA1}} {
			creds := x.client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: x.iters})
			user := a.user
			srv, err := x.hash.NewServer(func(name string) (scram.StoredCredentials, error) {
				if name != user {
					return scram.StoredCredentials{}, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
				}
				return creds, nil
			})
			if err != nil {
				a.initErr = err
				return
			}
			a.servers[x.mech] = srv
		}
	})
	return a.initErr
}

func (a *authenticator) state(conn *blackpipe.Conn) *authState {
	if st, ok := conn.Value(authKey{}).(*authState); ok {
		return st
	}
	st := &authState{}
	conn.SetValue(authKey{}, st)
	return st
}

func (a *authenticator) authenticated(conn *blackpipe.Conn) bool {
	if a.trusted != nil && a.trusted(conn) {
		return true
	}
	st, ok := conn.Value(authKey{}).(*authState)
	if !ok {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.user != ""
}

// supportedMechs answers hello's saslSupportedMechs "db.user".
func (a *authenticator) supportedMechs(dbUser string) bson.A {
	if dbUser != authDB+"."+a.user {
		return nil
	}
	return bson.A{mechSHA1, mechSHA256}
}

// start begins a SCRAM conversation (saslStart or speculativeAuthenticate).
func (a *authenticator) start(r *request, db string, doc bson.D) (bson.D, error) {
	mech, _ := lookupD(doc, "mechanism")
	ms, _ := mech.(string)
	if ms == mechPlain {
		return a.plain(r, db, doc)
	}
	if ms != mechSHA256 && ms != mechSHA1 {
		return nil, cmderr.Unsupported("authentication mechanism " + ms)
	}
	if err := a.init(); err != nil {
		return nil, cmderr.New(codeInternalError, "SCRAM setup: %v", err)
	}
	if db != authDB {
		r.cluster.stats.authFailures.Add(1)
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	payload, err := payloadOf(doc)
	if err != nil {
		return nil, err
	}
	st := a.state(r.raw.Conn)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.conv = a.servers[ms].NewConversation()
	st.conversationNo++
	st.convID = st.conversationNo
	st.awaitingEmpty = false
	st.skipEmpty = false
	if ov, ok := lookupD(doc, "options"); ok {
		if od, ok := ov.(bson.D); ok {
			if v, ok := lookupD(od, "skipEmptyExchange"); ok {
				st.skipEmpty = asBool(v)
			}
		}
	}
	resp, err := st.conv.Step(string(payload))
	if err != nil {
		st.conv = nil
		r.cluster.stats.authFailures.Add(1)
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	return bson.D{
		{Key: "conversationId", Value: st.convID},
		{Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(resp)}},
		{Key: "ok", Value: 1.0},
	}, nil
}

// speculative handles hello's speculativeAuthenticate; failures are
// silent (the client then authenticates normally and gets the error).
func (a *authenticator) speculative(r *request, doc bson.D) bson.D {
	db := authDB
	if v, ok := lookupD(doc, "db"); ok {
		if s, ok := v.(string); ok {
			db = s
		}
	}
	reply, err := a.start(r, db, doc)
	if err != nil {
		return nil
	}
	return reply[:len(reply)-1] // without ok
}

func saslStartCmd(r *request) (bson.D, error) {
	a := r.cluster.auth
	if a == nil {
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	return a.start(r, r.db, r.cmd)
}

func saslContinueCmd(r *request) (bson.D, error) {
	a := r.cluster.auth
	if a == nil {
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	st := a.state(r.raw.Conn)
	st.mu.Lock()
	defer st.mu.Unlock()
	idV, _ := r.get("conversationId")
	id, _ := asInt64(idV)
	if st.conv == nil || int32(id) != st.convID {
		return nil, cmderr.New(codeProtocolError, "No SASL session state found")
	}
	if st.awaitingEmpty {
		st.conv, st.awaitingEmpty = nil, false
		return saslReply(st.convID, true, nil), nil
	}
	payload, err := payloadOf(r.cmd)
	if err != nil {
		return nil, err
	}
	resp, err := st.conv.Step(string(payload))
	if err != nil || (st.conv.Done() && !st.conv.Valid()) {
		st.conv = nil
		r.cluster.stats.authFailures.Add(1)
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	if !st.conv.Done() {
		return saslReply(st.convID, false, []byte(resp)), nil
	}
	st.user = st.conv.Username()
	r.cluster.stats.authSuccesses.Add(1)
	if st.skipEmpty {
		st.conv = nil
		return saslReply(st.convID, true, []byte(resp)), nil
	}
	st.awaitingEmpty = true
	return saslReply(st.convID, false, []byte(resp)), nil
}

func saslReply(id int32, done bool, payload []byte) bson.D {
	if payload == nil {
		payload = []byte{}
	}
	return bson.D{
		{Key: "conversationId", Value: id},
		{Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: payload}},
		{Key: "ok", Value: 1.0},
	}
}

func payloadOf(doc bson.D) ([]byte, error) {
	v, ok := lookupD(doc, "payload")
	if !ok {
		return nil, cmderr.New(cmderr.NoSuchKey, "BSON field 'payload' is missing but a required field")
	}
	switch p := v.(type) {
	case bson.Binary:
		return p.Data, nil
	case string:
		return []byte(p), nil
	}
	return nil, typeErr("payload", "binData", v)
}

func connectionStatusCmd(r *request) (bson.D, error) {
	users, roles := bson.A{}, bson.A{}
	if a := r.cluster.auth; a != nil && a.authenticated(r.raw.Conn) {
		users = append(users, bson.D{{Key: "user", Value: a.user}, {Key: "db", Value: authDB}})
		roles = append(roles, bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: authDB}})
	}
	return bson.D{
		{Key: "authInfo", Value: bson.D{
			{Key: "authenticatedUsers", Value: users},
			{Key: "authenticatedUserRoles", Value: roles},
		}},
		{Key: "ok", Value: 1.0},
	}, nil
}

func init() {
	register(
		&command{name: "saslStart", run: saslStartCmd, noAuth: true, exempt: true},
		&command{name: "saslContinue", run: saslContinueCmd, noAuth: true, exempt: true},
		&command{name: "connectionStatus", run: connectionStatusCmd, noAuth: true},
	)
}

// plain checks a SASL PLAIN payload ("authzid\x00user\x00password", RFC
// 4616) in one step. Every failure is mongod's AuthenticationFailed, which
// says nothing about what was wrong.
func (a *authenticator) plain(r *request, db string, doc bson.D) (bson.D, error) {
	payload, err := payloadOf(doc)
	if err != nil {
		return nil, err
	}
	parts := bytes.Split(payload, []byte{0})
	if db != authDB || len(parts) != 3 || (len(parts[0]) > 0 && string(parts[0]) != string(parts[1])) ||
		subtle.ConstantTimeCompare(parts[1], []byte(a.user)) != 1 ||
		subtle.ConstantTimeCompare(parts[2], []byte(a.password)) != 1 {
		r.cluster.stats.authFailures.Add(1)
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	st := a.state(r.raw.Conn)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.conv, st.awaitingEmpty = nil, false
	st.conversationNo++
	st.convID = st.conversationNo
	st.user = a.user
	r.cluster.stats.authSuccesses.Add(1)
	return saslReply(st.convID, true, nil), nil
}
