package mongosim

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"slices"
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
	authDB     = "admin" // the Options user lives in admin
	// MongoDB's default iteration counts.
	itersSHA256 = 15000
	itersSHA1   = 10000
)

// authenticator holds the users and checks their SCRAM conversations. The
// Options user's keys are derived lazily (PBKDF2 is slow) on its first
// authentication; createUser derives a new user's at once.
type authenticator struct {
	mu    sync.Mutex
	users map[string]*simUser // by "db.name"
	// trusted, when set, reports connections that need no authentication:
	// a mongos router's own connections to the shard (shard_router.go).
	trusted func(*blackpipe.Conn) bool
}

// simUser is one user and its stored SCRAM credentials.
type simUser struct {
	name, db   string
	id         bson.Binary // userId, a UUID
	roles      bson.A      // [{role, db}]
	customData bson.D      // nil when none
	mechs      []string

	once     sync.Once
	password string // until the credentials are derived
	creds    map[string]scram.StoredCredentials
	err      error
}

// credentials returns the user's stored keys, deriving them on first use.
func (u *simUser) credentials() (map[string]scram.StoredCredentials, error) {
	u.once.Do(func() {
		u.creds, u.err = deriveCredentials(u.name, u.password, u.mechs)
		u.password = ""
	})
	return u.creds, u.err
}

// deriveCredentials computes the SCRAM stored keys of name/password, as
// mongod does: SCRAM-SHA-256 over the SASLprep'd password, SCRAM-SHA-1 over
// the hex MD5 "user:mongo:password" digest.
func deriveCredentials(name, password string, mechs []string) (map[string]scram.StoredCredentials, error) {
	out := make(map[string]scram.StoredCredentials, len(mechs))
	for _, mech := range mechs {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return nil, err
		}
		var client *scram.Client
		var err error
		iters := itersSHA256
		switch mech {
		case mechSHA256:
			client, err = scram.SHA256.NewClient(name, password, "")
		case mechSHA1:
			h := md5.Sum([]byte(name + ":mongo:" + password))
			client, err = scram.SHA1.NewClientUnprepped(name, hex.EncodeToString(h[:]), "")
			iters = itersSHA1
		default:
			return nil, cmderr.New(cmderr.BadValue, "Unknown auth mechanism '%s'", mech)
		}
		if err != nil {
			return nil, cmderr.New(cmderr.BadValue, "%v", err)
		}
		creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
		if err != nil {
			return nil, cmderr.New(cmderr.BadValue, "%v", err)
		}
		out[mech] = creds
	}
	return out, nil
}

// authKey is the blackpipe.Conn value holding a connection's *authState.
type authKey struct{}

// authState is one connection's authentication progress.
type authState struct {
	mu             sync.Mutex
	user           *simUser // set once authenticated
	conv           *scram.ServerConversation
	convUser       *simUser // the user of conv, once looked up
	convID         int32
	skipEmpty      bool
	awaitingEmpty  bool // server-final sent without skipEmptyExchange
	conversationNo int32
}

func newAuthenticator(o AuthOptions) *authenticator {
	a := &authenticator{users: map[string]*simUser{}}
	if o.Username != "" {
		a.users[authDB+"."+o.Username] = &simUser{
			name: o.Username, db: authDB, id: bson.Binary{Subtype: 4, Data: randomUUID()}, password: o.Password,
			roles: bson.A{bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: authDB}}},
			mechs: []string{mechSHA1, mechSHA256},
		}
	}
	return a
}

func (a *authenticator) lookup(db, name string) *simUser {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[db+"."+name]
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
	return st.user != nil
}

// supportedMechs answers hello's saslSupportedMechs "db.user".
func (a *authenticator) supportedMechs(dbUser string) bson.A {
	a.mu.Lock()
	u := a.users[dbUser]
	a.mu.Unlock()
	if u == nil {
		return nil
	}
	out := bson.A{}
	for _, m := range u.mechs {
		out = append(out, m)
	}
	return out
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
	payload, err := payloadOf(doc)
	if err != nil {
		return nil, err
	}
	st := a.state(r.raw.Conn)
	st.mu.Lock()
	defer st.mu.Unlock()
	hash := scram.SHA256
	if ms == mechSHA1 {
		hash = scram.SHA1
	}
	// The server looks the user up by the name in the client-first
	// message; a missing user fails as a wrong password does.
	st.convUser = nil
	srv, err := hash.NewServer(func(name string) (scram.StoredCredentials, error) {
		u := a.lookup(db, name)
		if u == nil || !slices.Contains(u.mechs, ms) {
			return scram.StoredCredentials{}, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
		}
		creds, err := u.credentials()
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		st.convUser = u
		return creds[ms], nil
	})
	if err != nil {
		return nil, cmderr.New(codeInternalError, "SCRAM setup: %v", err)
	}
	st.conv = srv.NewConversation()
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
	db := r.db
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
	return r.cluster.adm.users.start(r, r.db, r.cmd)
}

func saslContinueCmd(r *request) (bson.D, error) {
	a := r.cluster.adm.users
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
	st.user = st.convUser
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
	if st, ok := r.raw.Conn.Value(authKey{}).(*authState); ok {
		st.mu.Lock()
		u := st.user
		st.mu.Unlock()
		if u != nil {
			users = append(users, bson.D{{Key: "user", Value: u.name}, {Key: "db", Value: u.db}})
			roles = append(roles, u.roles...)
		}
	}
	info := bson.D{
		{Key: "authenticatedUsers", Value: users},
		{Key: "authenticatedUserRoles", Value: roles},
	}
	if v, ok := r.get("showPrivileges"); ok && asBool(v) {
		// Roles are not enforced, so there are no privileges to list.
		info = append(info, bson.E{Key: "authenticatedUserPrivileges", Value: bson.A{}})
	}
	return bson.D{{Key: "authInfo", Value: info}, {Key: "ok", Value: 1.0}}, nil
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
	var u *simUser
	if len(parts) == 3 && (len(parts[0]) == 0 || string(parts[0]) == string(parts[1])) {
		u = a.lookup(db, string(parts[1]))
	}
	if u == nil || !u.checkPassword(string(parts[2])) {
		r.cluster.stats.authFailures.Add(1)
		return nil, cmderr.New(cmderr.AuthenticationFailed, "Authentication failed.")
	}
	st := a.state(r.raw.Conn)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.conv, st.awaitingEmpty = nil, false
	st.conversationNo++
	st.convID = st.conversationNo
	st.user = u
	r.cluster.stats.authSuccesses.Add(1)
	return saslReply(st.convID, true, nil), nil
}

// checkPassword reports whether password is u's, by deriving its
// SCRAM-SHA-256 stored key with u's salt (or SCRAM-SHA-1's when that is
// all u has).
func (u *simUser) checkPassword(password string) bool {
	creds, err := u.credentials()
	if err != nil {
		return false
	}
	mech := mechSHA256
	if _, ok := creds[mech]; !ok {
		mech = mechSHA1
	}
	stored, ok := creds[mech]
	if !ok {
		return false
	}
	var client *scram.Client
	if mech == mechSHA256 {
		client, err = scram.SHA256.NewClient(u.name, password, "")
	} else {
		h := md5.Sum([]byte(u.name + ":mongo:" + password))
		client, err = scram.SHA1.NewClientUnprepped(u.name, hex.EncodeToString(h[:]), "")
	}
	if err != nil {
		return false
	}
	got, err := client.GetStoredCredentialsWithError(stored.KeyFactors)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got.StoredKey, stored.StoredKey) == 1
}
