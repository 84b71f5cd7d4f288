package conn

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/mongoerr"
)

// Authentication mechanisms.
const (
	MechSCRAMSHA1   = "SCRAM-SHA-1"
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechX509        = "MONGODB-X509"
	MechPLAIN       = "PLAIN"
)

// authenticator runs one mechanism on a freshly handshaken connection.
type authenticator interface {
	// mechsQuery is hello's saslSupportedMechs value ("" for none).
	mechsQuery() string
	// speculative is hello's speculativeAuthenticate document, or nil.
	speculative() (bson.D, error)
	// authenticate finishes (or runs) the conversation; c.desc holds the
	// hello reply, including any speculative answer.
	authenticate(ctx context.Context, c *Conn) error
}

func newAuthenticator(cred *connstring.Credential) (authenticator, error) {
	mech := strings.ToUpper(cred.Mechanism)
	switch mech {
	case "", MechSCRAMSHA1, MechSCRAMSHA256:
		if cred.Username == "" {
			return nil, &mongoerr.AuthError{Mechanism: orDefault(mech, "SCRAM"), Err: errors.New("a username is required")}
		}
		source := cred.Source
		if source == "" {
			source = "admin"
		}
		return &scramAuth{cred: cred, mech: mech, source: source}, nil
	case MechX509:
		if cred.Source != "" && cred.Source != "$external" {
			return nil, &mongoerr.AuthError{Mechanism: mech, Err: fmt.Errorf("source must be $external, not %q", cred.Source)}
		}
		if cred.Password != "" {
			return nil, &mongoerr.AuthError{Mechanism: mech, Err: errors.New("a password is not allowed")}
		}
		return &x509Auth{user: cred.Username}, nil
	case MechPLAIN:
		if cred.Username == "" {
			return nil, &mongoerr.AuthError{Mechanism: mech, Err: errors.New("a username is required")}
		}
		source := cred.Source
		if source == "" {
			source = "$external"
		}
		return &plainAuth{cred: cred, source: source}, nil
	}
	return nil, &mongoerr.AuthError{Mechanism: cred.Mechanism, Err: fmt.Errorf("mechanism %q is not supported (supported: SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509, PLAIN)", cred.Mechanism)}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runCommand is a round trip for the auth conversation: server errors become
// *AuthError, network errors pass through (the connection is closed).
func runCommand(ctx context.Context, c *Conn, mech, db string, cmd bson.D) (bson.Raw, error) {
	body, err := bson.Marshal(cmd)
	if err != nil {
		return nil, &mongoerr.AuthError{Mechanism: mech, Err: err}
	}
	r, err := c.Send(ctx, &Request{DB: db, Command: body})
	if err != nil {
		var ne *mongoerr.NetworkError
		if errors.As(err, &ne) {
			return nil, err
		}
		return nil, &mongoerr.AuthError{Mechanism: mech, Err: err}
	}
	return r.Body, nil
}

// scramClients caches SCRAM clients by mechanism and credentials: a client
// caches the salted password per salt and iteration count, so only the first
// connection pays for PBKDF2 (MongoDB uses 10 000 and 15 000 iterations).
var scramClients struct {
	sync.Mutex
	m map[scramKey]*scram.Client
}

type scramKey struct{ mech, user, password string }

const maxCachedSCRAMClients = 64

func scramClient(mech, user, password string) (*scram.Client, error) {
	k := scramKey{mech, user, password}
	scramClients.Lock()
	defer scramClients.Unlock()
	if cl := scramClients.m[k]; cl != nil {
		return cl, nil
	}
	var (
		cl  *scram.Client
		err error
	)
	if mech == MechSCRAMSHA1 {
		// MongoDB's SCRAM-SHA-1 uses the legacy digest as the password,
		// without SASLprep.
		h := md5.Sum([]byte(user + ":mongo:" + password))
		cl, err = scram.SHA1.NewClientUnprepped(user, hex.EncodeToString(h[:]), "")
	} else {
		cl, err = scram.SHA256.NewClient(user, password, "")
	}
	if err != nil {
		return nil, err
	}
	cl = cl.WithMinIterations(4096)
	if scramClients.m == nil || len(scramClients.m) >= maxCachedSCRAMClients {
		scramClients.m = make(map[scramKey]*scram.Client)
	}
	scramClients.m[k] = cl
	return cl, nil
}

type scramAuth struct {
	cred   *connstring.Credential
	mech   string // as configured; "" negotiates
	source string

	specMech string // mechanism of the speculative conversation
	specConv *scram.ClientConversation
}

func (a *scramAuth) mechsQuery() string {
	if a.mech != "" {
		return ""
	}
	return a.source + "." + a.cred.Username
}

func (a *scramAuth) start(mech string) (*scram.ClientConversation, bson.D, error) {
	cl, err := scramClient(mech, a.cred.Username, a.cred.Password)
	if err != nil {
		return nil, nil, &mongoerr.AuthError{Mechanism: mech, Err: err}
	}
	conv := cl.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		return nil, nil, &mongoerr.AuthError{Mechanism: mech, Err: err}
	}
	return conv, bson.D{
		{Key: "saslStart", Value: int32(1)},
		{Key: "mechanism", Value: mech},
		{Key: "payload", Value: bson.Binary{Data: []byte(first)}},
		{Key: "autoAuthorize", Value: int32(1)},
		{Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}},
	}, nil
}

// speculative starts the conversation in hello; without a configured
// mechanism it speculates on SCRAM-SHA-256, as the handshake spec says.
func (a *scramAuth) speculative() (bson.D, error) {
	mech := orDefault(a.mech, MechSCRAMSHA256)
	conv, cmd, err := a.start(mech)
	if err != nil {
		return nil, err
	}
	a.specMech, a.specConv = mech, conv
	return append(cmd, bson.E{Key: "db", Value: a.source}), nil
}

func (a *scramAuth) authenticate(ctx context.Context, c *Conn) error {
	if spec := c.desc.SpeculativeAuthenticate; spec != nil && a.specConv != nil {
		return a.converse(ctx, c, a.specMech, a.specConv, spec)
	}
	mech := a.mech
	if mech == "" {
		mech = MechSCRAMSHA1
		if slices.Contains(c.desc.SaslSupportedMechs, MechSCRAMSHA256) {
			mech = MechSCRAMSHA256
		}
	}
	conv, cmd, err := a.start(mech)
	if err != nil {
		return err
	}
	reply, err := runCommand(ctx, c, mech, a.source, cmd)
	if err != nil {
		return err
	}
	return a.converse(ctx, c, mech, conv, reply)
}

// converse continues a conversation from a saslStart (or speculative) reply
// until the server says done and the client has verified the server.
func (a *scramAuth) converse(ctx context.Context, c *Conn, mech string, conv *scram.ClientConversation, reply bson.Raw) error {
	// A SCRAM exchange takes two more steps at most, plus the empty one
	// servers without skipEmptyExchange ask for.
	for range 4 {
		convID, payload, done, err := saslFields(reply)
		if err != nil {
			return &mongoerr.AuthError{Mechanism: mech, Err: err}
		}
		var resp string
		if !conv.Done() {
			if resp, err = conv.Step(string(payload)); err != nil {
				return &mongoerr.AuthError{Mechanism: mech, Err: err}
			}
		}
		if done {
			if !conv.Done() || !conv.Valid() {
				return &mongoerr.AuthError{Mechanism: mech, Err: errors.New("server ended the conversation before proving it knows the password")}
			}
			return nil
		}
		reply, err = runCommand(ctx, c, mech, a.source, bson.D{
			{Key: "saslContinue", Value: int32(1)},
			{Key: "conversationId", Value: convID},
			{Key: "payload", Value: bson.Binary{Data: []byte(resp)}},
		})
		if err != nil {
			return err
		}
	}
	return &mongoerr.AuthError{Mechanism: mech, Err: errors.New("server did not finish the conversation")}
}

// saslFields reads conversationId, payload and done from a SASL reply.
func saslFields(reply bson.Raw) (convID bson.RawValue, payload []byte, done bool, err error) {
	convID, err = reply.LookupErr("conversationId")
	if err != nil {
		return convID, nil, false, errors.New("reply has no conversationId")
	}
	if v, lerr := reply.LookupErr("payload"); lerr == nil {
		if _, data, ok := v.BinaryOK(); ok {
			payload = data
		} else if s, ok := v.StringValueOK(); ok {
			payload = []byte(s)
		} else {
			return convID, nil, false, errors.New("reply payload is not binary")
		}
	}
	if v, lerr := reply.LookupErr("done"); lerr == nil {
		done = truthy(v)
	}
	return convID, payload, done, nil
}

// x509Auth authenticates with the TLS client certificate's subject.
type x509Auth struct{ user string }

func (a *x509Auth) mechsQuery() string { return "" }

func (a *x509Auth) command() bson.D {
	cmd := bson.D{{Key: "authenticate", Value: int32(1)}, {Key: "mechanism", Value: MechX509}}
	if a.user != "" {
		cmd = append(cmd, bson.E{Key: "user", Value: a.user})
	}
	return cmd
}

func (a *x509Auth) speculative() (bson.D, error) {
	return append(a.command(), bson.E{Key: "db", Value: "$external"}), nil
}

func (a *x509Auth) authenticate(ctx context.Context, c *Conn) error {
	if c.desc.SpeculativeAuthenticate != nil {
		return nil // the server accepted the certificate in hello
	}
	_, err := runCommand(ctx, c, MechX509, "$external", a.command())
	return err
}

// plainAuth is SASL PLAIN (LDAP); the password travels in clear text, so it
// belongs on TLS connections only.
type plainAuth struct {
	cred   *connstring.Credential
	source string
}

func (a *plainAuth) mechsQuery() string           { return "" }
func (a *plainAuth) speculative() (bson.D, error) { return nil, nil }

func (a *plainAuth) authenticate(ctx context.Context, c *Conn) error {
	payload := []byte("\x00" + a.cred.Username + "\x00" + a.cred.Password)
	reply, err := runCommand(ctx, c, MechPLAIN, a.source, bson.D{
		{Key: "saslStart", Value: int32(1)},
		{Key: "mechanism", Value: MechPLAIN},
		{Key: "payload", Value: bson.Binary{Data: payload}},
		{Key: "autoAuthorize", Value: int32(1)},
	})
	if err != nil {
		return err
	}
	if _, _, done, err := saslFields(reply); err != nil || !done {
		return &mongoerr.AuthError{Mechanism: MechPLAIN, Err: errors.New("server did not finish the PLAIN conversation")}
	}
	return nil
}
