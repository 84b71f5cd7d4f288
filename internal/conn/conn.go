package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/mongoerr"
	"github.com/sturdy-go/sturdy/wire"
)

// Options configures Dial. The zero value dials with a 10 s timeout and no
// application name.
type Options struct {
	AppName     string
	DialTimeout time.Duration // default 10 s
}

// Description is what the server's hello reply said about it.
type Description struct {
	MaxWireVersion               int32
	SetName                      string
	IsWritablePrimary            bool
	Secondary                    bool
	Hosts                        []string
	Primary                      string
	LogicalSessionTimeoutMinutes *int32
	MaxMessageSizeBytes          int32
}

// Conn is one connection. It is not safe for concurrent round trips.
type Conn struct {
	nc     net.Conn
	addr   string
	desc   Description
	buf    []byte
	closed atomic.Bool
	mu     sync.Mutex
}

var requestIDs atomic.Int32

// NetworkError and CommandError are the shared client error types.
type (
	NetworkError = mongoerr.NetworkError
	CommandError = mongoerr.CommandError
)

// ErrClosed is returned for round trips on a closed connection.
var ErrClosed = errors.New("conn: connection closed")

// Dial connects to addr and runs the hello handshake.
func Dial(ctx context.Context, addr string, o Options) (*Conn, error) {
	timeout := o.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &NetworkError{Addr: addr, Op: "dial", Err: err}
	}
	c := &Conn{nc: nc, addr: addr}
	hello := bson.D{{Key: "hello", Value: int32(1)}, {Key: "helloOk", Value: true}}
	client := bson.D{
		{Key: "driver", Value: bson.D{{Key: "name", Value: "sturdy"}, {Key: "version", Value: "0.1"}}},
		{Key: "os", Value: bson.D{{Key: "type", Value: "linux"}}},
	}
	if o.AppName != "" {
		client = append(client, bson.E{Key: "application", Value: bson.D{{Key: "name", Value: o.AppName}}})
	}
	hello = append(hello, bson.E{Key: "client", Value: client}, bson.E{Key: "backpressure", Value: true})
	raw, err := c.RoundTrip(ctx, "admin", hello)
	if err != nil {
		c.Close()
		return nil, err
	}
	var desc struct {
		MaxWireVersion               int32    `bson:"maxWireVersion"`
		SetName                      string   `bson:"setName"`
		IsWritablePrimary            bool     `bson:"isWritablePrimary"`
		Secondary                    bool     `bson:"secondary"`
		Hosts                        []string `bson:"hosts"`
		Primary                      string   `bson:"primary"`
		LogicalSessionTimeoutMinutes *int32   `bson:"logicalSessionTimeoutMinutes"`
		MaxMessageSizeBytes          int32    `bson:"maxMessageSizeBytes"`
	}
	if err := bson.Unmarshal(raw, &desc); err != nil {
		c.Close()
		return nil, fmt.Errorf("conn: decoding hello reply from %s: %w", addr, err)
	}
	c.desc = Description(desc)
	return c, nil
}

// Description returns what the handshake learned.
func (c *Conn) Description() Description { return c.desc }

// Addr is the server address.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection; it is safe to call more than once.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.nc.Close()
}

// Closed reports whether the connection was closed (by Close or a network error).
func (c *Conn) Closed() bool { return c.closed.Load() }

// RoundTrip sends cmd to database db and returns the reply. An {ok: 0}
// reply gives a *CommandError; an I/O failure closes the connection and
// gives a *NetworkError. The returned document is only valid until the next
// round trip on this connection.
func (c *Conn) RoundTrip(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	body, err := bson.Marshal(append(cmd[:len(cmd):len(cmd)], bson.E{Key: "$db", Value: db}))
	if err != nil {
		return nil, fmt.Errorf("conn: encoding command: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
	} else {
		_ = c.nc.SetDeadline(time.Time{})
	}
	// Abort blocked I/O when ctx is canceled without a deadline.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.buf = wire.AppendMsg(c.buf[:0], requestIDs.Add(1), 0, &wire.Msg{Body: body})
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, c.fail(ctx, "write", err)
	}
	c.buf, err = wire.ReadMessage(c.nc, c.buf[:0], 0)
	if err != nil {
		return nil, c.fail(ctx, "read", err)
	}
	m, err := wire.Decode(c.buf, 0)
	if err != nil {
		return nil, c.fail(ctx, "decode", err)
	}
	var reply bson.Raw
	switch {
	case m.Msg != nil:
		reply = m.Msg.Body
	case m.Reply != nil && len(m.Reply.Documents) > 0:
		reply = m.Reply.Documents[0]
	default:
		return nil, c.fail(ctx, "decode", errors.New("reply has no document"))
	}
	return reply, mongoerr.FromReply(reply)
}

func (c *Conn) fail(ctx context.Context, op string, err error) error {
	c.Close()
	ctxErr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(dl) {
		// The socket deadline can fire a moment before the context's timer.
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil {
		err = fmt.Errorf("%w (%v)", ctxErr, err)
	}
	return &NetworkError{Addr: c.addr, Op: op, Err: err}
}
