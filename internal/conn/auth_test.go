package conn_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"sync"
	"testing"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/blackpipe"
	"github.com/sturdy-go/sturdy/internal/conn"
	"github.com/sturdy-go/sturdy/internal/connstring"
	"github.com/sturdy-go/sturdy/mongoerr"
	"github.com/sturdy-go/sturdy/mongosim"
)

func TestSCRAMAgainstMongosim(t *testing.T) {
	sim := mongosim.StartWithOptions(t, mongosim.Options{Auth: mongosim.AuthOptions{Username: "u", Password: "p"}})
	addr := sim.Members()[0].Addr()
	ctx := context.Background()
	for _, mech := range []string{"", conn.MechSCRAMSHA256, conn.MechSCRAMSHA1} {
		t.Run("mech="+mech, func(t *testing.T) {
			c, err := conn.Dial(ctx, addr, conn.Options{Credential: &connstring.Credential{Mechanism: mech, Username: "u", Password: "p"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Description().SpeculativeAuthenticate == nil {
				t.Error("mongosim took no speculative step")
			}
			st, err := c.RoundTrip(ctx, "admin", bson.D{{Key: "connectionStatus", Value: 1}})
			if err != nil {
				t.Fatal(err)
			}
			users, _ := st.LookupErr("authInfo", "authenticatedUsers")
			if vals, _ := users.Array().Values(); len(vals) != 1 {
				t.Errorf("connectionStatus after auth: %v", st)
			}
			if _, err := c.RoundTrip(ctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
				t.Errorf("find after auth: %v", err)
			}
		})
	}

	for name, cred := range map[string]*connstring.Credential{
		"wrong password": {Username: "u", Password: "wrong"},
		"wrong user":     {Mechanism: conn.MechSCRAMSHA1, Username: "nobody", Password: "p"},
		"wrong source":   {Mechanism: conn.MechSCRAMSHA256, Username: "u", Password: "p", Source: "db"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := conn.Dial(ctx, addr, conn.Options{Credential: cred})
			var ae *mongoerr.AuthError
			var ce *mongoerr.CommandError
			if !errors.As(err, &ae) || !errors.As(err, &ce) || ce.Code != 18 {
				t.Fatalf("got %v, want an AuthError wrapping AuthenticationFailed", err)
			}
			if ae.Mechanism == "" {
				t.Error("AuthError has no mechanism")
			}
		})
	}
	if st := sim.Stats(); st.AuthSuccesses < 3 || st.AuthFailures < 3 {
		t.Errorf("server stats %+v", st)
	}
}

// scramServer is a blackpipe handler pair that authenticates user/password
// with xdg-go/scram's server side, without speculative authentication, and
// optionally without honouring skipEmptyExchange.
type scramServer struct {
	mechs        bson.A
	honourSkip   bool
	mu           sync.Mutex
	conv         *scram.ServerConversation
	skip         bool
	awaitEmpty   bool
	startCmds    []bson.Raw
	continueCmds int
	hellos       []bson.Raw
}

func newSCRAMServer(t *testing.T, srv *blackpipe.Server, user, password string, mechs bson.A, honourSkip bool) *scramServer {
	t.Helper()
	s := &scramServer{mechs: mechs, honourSkip: honourSkip}
	servers := map[string]*scram.Server{}
	for _, mech := range []string{conn.MechSCRAMSHA1, conn.MechSCRAMSHA256} {
		var cl *scram.Client
		var err error
		hash := scram.SHA256
		if mech == conn.MechSCRAMSHA1 {
			hash = scram.SHA1
			h := md5.Sum([]byte(user + ":mongo:" + password))
			cl, err = scram.SHA1.NewClientUnprepped(user, hex.EncodeToString(h[:]), "")
		} else {
			cl, err = scram.SHA256.NewClient(user, password, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		creds, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: "0123456789abcdef", Iters: 4096})
		if err != nil {
			t.Fatal(err)
		}
		sv, err := hash.NewServer(func(name string) (scram.StoredCredentials, error) {
			if name != user {
				return scram.StoredCredentials{}, errors.New("unknown user")
			}
			return creds, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		servers[mech] = sv
	}
	srv.Autorespond(blackpipe.Command("hello"), func(r *blackpipe.Request) bool {
		s.mu.Lock()
		s.hellos = append(s.hellos, r.Command)
		s.mu.Unlock()
		reply := srv.HelloReply(r)
		reply = append(reply[:len(reply)-1:len(reply)-1], bson.E{Key: "saslSupportedMechs", Value: s.mechs})
		return r.Reply(reply) == nil
	})
	fail := func(r *blackpipe.Request) bool { return r.ReplyError(18, "Authentication failed.") == nil }
	srv.Autorespond(blackpipe.Command("saslStart"), func(r *blackpipe.Request) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.startCmds = append(s.startCmds, r.Command)
		mech, _ := r.Command.Lookup("mechanism").StringValueOK()
		sv := servers[mech]
		if sv == nil {
			return fail(r)
		}
		s.skip, _ = r.Command.Lookup("options", "skipEmptyExchange").BooleanOK()
		s.skip = s.skip && s.honourSkip
		s.conv = sv.NewConversation()
		_, payload := r.Command.Lookup("payload").Binary()
		resp, err := s.conv.Step(string(payload))
		if err != nil {
			return fail(r)
		}
		return r.Reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false},
			{Key: "payload", Value: bson.Binary{Data: []byte(resp)}}}) == nil
	})
	srv.Autorespond(blackpipe.Command("saslContinue"), func(r *blackpipe.Request) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.continueCmds++
		if s.conv == nil {
			return fail(r)
		}
		if s.awaitEmpty {
			s.conv, s.awaitEmpty = nil, false
			return r.Reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
				{Key: "payload", Value: bson.Binary{Data: []byte{}}}}) == nil
		}
		_, payload := r.Command.Lookup("payload").Binary()
		resp, err := s.conv.Step(string(payload))
		if err != nil || !s.conv.Valid() {
			s.conv = nil
			return fail(r)
		}
		done := s.skip
		s.awaitEmpty = !s.skip
		return r.Reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: done},
			{Key: "payload", Value: bson.Binary{Data: []byte(resp)}}}) == nil
	})
	return s
}

func TestSCRAMNegotiationWithoutSpeculation(t *testing.T) {
	cases := []struct {
		name       string
		mechs      bson.A
		configured string
		want       string
		honourSkip bool
		continues  int
	}{
		{"sha256 offered", bson.A{"SCRAM-SHA-1", "SCRAM-SHA-256"}, "", conn.MechSCRAMSHA256, true, 1},
		{"sha1 only", bson.A{"SCRAM-SHA-1"}, "", conn.MechSCRAMSHA1, true, 1},
		{"none listed", bson.A{}, "", conn.MechSCRAMSHA1, true, 1},
		{"configured sha1", bson.A{"SCRAM-SHA-1", "SCRAM-SHA-256"}, conn.MechSCRAMSHA1, conn.MechSCRAMSHA1, true, 1},
		{"empty exchange", bson.A{"SCRAM-SHA-256"}, "", conn.MechSCRAMSHA256, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := blackpipe.Start(t)
			s := newSCRAMServer(t, srv, "user", "pencil", tc.mechs, tc.honourSkip)
			c, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Credential: &connstring.Credential{Mechanism: tc.configured, Username: "user", Password: "pencil", Source: "admin"}})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			s.mu.Lock()
			defer s.mu.Unlock()
			hello := s.hellos[0]
			spec, err := hello.LookupErr("speculativeAuthenticate")
			if err != nil {
				t.Fatal("hello has no speculativeAuthenticate")
			}
			specMech := tc.configured
			if specMech == "" {
				specMech = conn.MechSCRAMSHA256
			}
			if m, _ := spec.Document().Lookup("mechanism").StringValueOK(); m != specMech {
				t.Errorf("speculative mechanism %q, want %q", m, specMech)
			}
			if db, _ := spec.Document().Lookup("db").StringValueOK(); db != "admin" {
				t.Errorf("speculative db %q", db)
			}
			mechs, err := hello.LookupErr("saslSupportedMechs")
			if tc.configured == "" && (err != nil || mechs.StringValue() != "admin.user") {
				t.Errorf("saslSupportedMechs = %v", mechs)
			}
			if tc.configured != "" && err == nil {
				t.Error("saslSupportedMechs sent though the mechanism is configured")
			}
			if len(s.startCmds) != 1 {
				t.Fatalf("%d saslStart commands", len(s.startCmds))
			}
			start := s.startCmds[0]
			if m := start.Lookup("mechanism").StringValue(); m != tc.want {
				t.Errorf("saslStart mechanism %q, want %q", m, tc.want)
			}
			if v, err := start.LookupErr("options", "skipEmptyExchange"); err != nil || !v.Boolean() {
				t.Errorf("saslStart lacks options.skipEmptyExchange: %v", start)
			}
			if s.continueCmds != tc.continues {
				t.Errorf("%d saslContinue commands, want %d", s.continueCmds, tc.continues)
			}
		})
	}
}

func TestSCRAMWrongPasswordAgainstBlackpipe(t *testing.T) {
	// The server stores a different password, so it refuses our proof.
	srv := blackpipe.Start(t)
	newSCRAMServer(t, srv, "user", "other", bson.A{"SCRAM-SHA-256"}, true)
	_, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Credential: &connstring.Credential{Username: "user", Password: "pencil"}})
	var ae *mongoerr.AuthError
	if !errors.As(err, &ae) || ae.Mechanism != conn.MechSCRAMSHA256 {
		t.Fatalf("got %v", err)
	}
}

func TestAuthNetworkFailureIsNetworkError(t *testing.T) {
	srv := blackpipe.Start(t)
	newSCRAMServer(t, srv, "user", "pencil", bson.A{"SCRAM-SHA-256"}, true)
	srv.Autorespond(blackpipe.Command("saslContinue"), func(r *blackpipe.Request) bool { return r.Hangup() == nil })
	_, err := conn.Dial(context.Background(), srv.Addr(), conn.Options{Credential: &connstring.Credential{Username: "user", Password: "pencil"}})
	var ne *mongoerr.NetworkError
	var ae *mongoerr.AuthError
	if !errors.As(err, &ne) || errors.As(err, &ae) {
		t.Fatalf("got %v, want a NetworkError", err)
	}
}

func TestX509AndPLAIN(t *testing.T) {
	srv := blackpipe.Start(t)
	var mu sync.Mutex
	var got []bson.Raw
	srv.Autorespond(blackpipe.AnyOf(blackpipe.Command("authenticate"), blackpipe.Command("saslStart")), func(r *blackpipe.Request) bool {
		mu.Lock()
		got = append(got, r.Command)
		mu.Unlock()
		if r.Name == "authenticate" {
			return r.Reply(bson.D{{Key: "user", Value: "CN=client"}}) == nil
		}
		return r.Reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
			{Key: "payload", Value: bson.Binary{Data: []byte{}}}}) == nil
	})
	ctx := context.Background()
	c, err := conn.Dial(ctx, srv.Addr(), conn.Options{Credential: &connstring.Credential{Mechanism: "MONGODB-X509"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = conn.Dial(ctx, srv.Addr(), conn.Options{Credential: &connstring.Credential{Mechanism: "PLAIN", Username: "user", Password: "pencil"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("got %d auth commands", len(got))
	}
	if m := got[0].Lookup("mechanism").StringValue(); m != "MONGODB-X509" || got[0].Lookup("$db").StringValue() != "$external" {
		t.Errorf("x509 command %v", got[0])
	}
	_, payload := got[1].Lookup("payload").Binary()
	if string(payload) != "\x00user\x00pencil" || got[1].Lookup("$db").StringValue() != "$external" {
		t.Errorf("PLAIN command %v", got[1])
	}
}
