package faultproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// proxyConn is one client connection and its upstream connection. Two
// pumps move messages: requests (client → upstream, where rules apply) in
// the serving goroutine, replies (upstream → client) in a second one. A
// request registers what its reply needs (hello rewriting, a delay, being
// dropped) before it is forwarded, keyed by its requestID.
type proxyConn struct {
	p      *Proxy
	l      *listener
	id     int64
	client net.Conn
	ctx    context.Context // ends when the pair closes or the proxy does
	cancel context.CancelFunc

	writeMu sync.Mutex // serializes writes to the client

	mu      sync.Mutex
	up      net.Conn // nil until dialled
	closed  bool
	pending map[int32]pending

	appName string // from the handshake; used by the request pump only
}

// pending is what happens to the reply of one forwarded request.
type pending struct {
	hello      bool // rewrite the addresses in it
	drop       bool // close instead of passing it on
	rst        bool // close with a reset
	replyDelay time.Duration
}

func (p *Proxy) newConn(l *listener, c net.Conn) *proxyConn {
	ctx, cancel := context.WithCancel(p.ctx)
	return &proxyConn{p: p, l: l, id: p.nextConnID.Add(1), client: c, ctx: ctx, cancel: cancel, pending: map[int32]pending{}}
}

// close closes both connections, the client's with a TCP reset if rst.
func (pc *proxyConn) close(rst bool) {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	pc.closed = true
	up := pc.up
	pc.mu.Unlock()
	pc.cancel()
	if rst {
		raw := pc.client
		if tc, ok := raw.(*tls.Conn); ok {
			raw = tc.NetConn()
		}
		if tcp, ok := raw.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = pc.client.Close()
	if up != nil {
		_ = up.Close()
	}
}

func (pc *proxyConn) serve() {
	p := pc.p
	defer p.wg.Done()
	defer p.untrack(pc)
	defer pc.close(false)
	up, err := p.dialUpstream(pc.ctx, pc.l.upstream)
	if err != nil {
		if pc.ctx.Err() == nil {
			p.logf("faultproxy: conn %d: connecting to %s: %v", pc.id, pc.l.upstream, err)
		}
		return
	}
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		_ = up.Close()
		return
	}
	pc.up = up
	pc.mu.Unlock()
	p.stats.upstreamDials.Add(1)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer pc.close(false)
		pc.pumpReplies(up)
	}()
	pc.pumpRequests(up)
	pc.close(false)
	wg.Wait()
}

// readErr logs why a side stopped, unless it just hung up or we closed.
func (pc *proxyConn) readErr(side string, err error) {
	if errors.Is(err, io.EOF) || pc.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, wire.ErrMalformed) || errors.Is(err, wire.ErrMessageTooLarge) {
		pc.p.stats.malformed.Add(1)
	}
	pc.p.logf("faultproxy: conn %d: reading from %s: %v", pc.id, side, err)
}

func (pc *proxyConn) malformed(side string, err error) {
	pc.p.stats.malformed.Add(1)
	pc.p.logf("faultproxy: conn %d: closing: %s sent %v", pc.id, side, err)
}

func (pc *proxyConn) writeClient(b []byte) error {
	pc.writeMu.Lock()
	defer pc.writeMu.Unlock()
	_, err := pc.client.Write(b)
	return err
}

// pumpRequests reads client messages, applies the rules and forwards.
func (pc *proxyConn) pumpRequests(up net.Conn) {
	var buf []byte
	for {
		b, m, ok := pc.readRequest(buf)
		if !ok {
			return
		}
		buf = b
		if !pc.handleRequest(up, b, m) {
			return
		}
	}
}

// readRequest reads and decodes the client's next message, reusing buf;
// it reports false (having logged why) when the connection must close.
func (pc *proxyConn) readRequest(buf []byte) ([]byte, wire.Message, bool) {
	p := pc.p
	maxSize := p.opts.MaxMessageSize
	b, err := wire.ReadMessage(pc.client, buf[:0], maxSize)
	if err != nil {
		pc.readErr("client", err)
		return nil, wire.Message{}, false
	}
	p.stats.requests.Add(1)
	pc.l.requests.Add(1)
	m, err := wire.Decode(b, maxSize)
	if err != nil {
		pc.malformed("client", err)
		return nil, wire.Message{}, false
	}
	if m.Msg == nil && m.Query == nil {
		pc.malformed("client", errors.New("a "+m.Header.OpCode.String()+" message, which is not a request"))
		return nil, wire.Message{}, false
	}
	return b, m, true
}

// handleRequest applies the rules to one request b (decoded as m) and
// forwards it unless a rule answers it; false means the connection closed.
func (pc *proxyConn) handleRequest(up net.Conn, b []byte, m wire.Message) bool {
	p := pc.p
	in := inspect(m)
	out := b
	if in.hello {
		if name := appName(in.cmd); name != "" {
			pc.appName = name
		}
		if s := stripCompression(&in); s != nil {
			out = s
		}
	}
	pend, fate := pc.applyRules(&in)
	switch fate {
	case requestAnswered:
		return true
	case connDone:
		return false
	}
	if !in.moreToCome && pend != (pending{}) {
		pc.mu.Lock()
		pc.pending[m.Header.RequestID] = pend
		pc.mu.Unlock()
	}
	if _, err := up.Write(out); err != nil {
		return false // the reply pump reports why the upstream went away
	}
	p.stats.forwarded.Add(1)
	if in.moreToCome && pend.drop {
		// No reply will come: the request is on its way, so close now.
		sleepCtx(pc.ctx, pend.replyDelay)
		p.stats.repliesDropped.Add(1)
		pc.close(pend.rst)
		return false
	}
	return true
}

// requestFate is what applying the rules left to do with a request.
type requestFate int

const (
	requestForward  requestFate = iota // forward it; pending says what happens to its reply
	requestAnswered                    // the proxy answered it, or nobody waits for an answer
	connDone                           // stop: a rule closed the connection, the client went away or the proxy stops
)

// applyRules runs the first rule matching the request, if any.
func (pc *proxyConn) applyRules(in *inbound) (pending, requestFate) {
	p := pc.p
	q := request{command: in.name, db: in.db, namespaces: in.namespaces(), appName: pc.appName, connID: pc.id}
	rs := p.rules.Load()
	idx, act, fired := rs.decide(&q)
	pend := pending{hello: in.hello}
	if !fired {
		return pend, requestForward
	}
	p.stats.fired.Add(1)
	p.logf("faultproxy: conn %d (%s): %s on %s: %s fired: %s", pc.id, pc.l.upstream, in.name, in.db, rs.name(idx), act.Kind)
	if !sleepCtx(pc.ctx, act.Delay) {
		return pend, connDone
	}
	switch act.Kind {
	case DropRequest:
		pc.close(act.RST)
		return pend, connDone
	case Reset:
		pc.close(true)
		return pend, connDone
	case Error, Shed:
		if in.moreToCome {
			return pend, requestAnswered // nobody waits for an answer
		}
		if err := pc.writeClient(p.injectedReply(in, act)); err != nil {
			return pend, connDone
		}
		p.stats.injected.Add(1)
		return pend, requestAnswered
	case DropReply:
		pend.drop, pend.rst, pend.replyDelay = true, act.RST, act.ReplyDelay
	case Delay:
		pend.replyDelay = act.ReplyDelay
	}
	return pend, requestForward
}

// pumpReplies reads upstream messages, applies what their requests
// registered and passes them to the client.
func (pc *proxyConn) pumpReplies(up net.Conn) {
	p := pc.p
	maxSize := p.opts.MaxMessageSize
	var buf []byte
	streamingHello := false // the previous reply was a hello with moreToCome
	for {
		b, err := wire.ReadMessage(up, buf[:0], maxSize)
		if err != nil {
			pc.readErr("upstream", err)
			return
		}
		buf = b
		m, err := wire.Decode(b, maxSize)
		if err != nil {
			pc.malformed("upstream", err)
			return
		}
		if m.Msg == nil && m.Reply == nil {
			pc.malformed("upstream", errors.New("a "+m.Header.OpCode.String()+" message, which is not a reply"))
			return
		}
		pc.mu.Lock()
		pend := pc.pending[m.Header.ResponseTo]
		delete(pc.pending, m.Header.ResponseTo)
		pc.mu.Unlock()
		hello := pend.hello || streamingHello
		streamingHello = hello && m.Msg != nil && m.Msg.Flags&wire.MoreToCome != 0
		if !sleepCtx(pc.ctx, pend.replyDelay) {
			return
		}
		if pend.drop {
			p.stats.repliesDropped.Add(1)
			pc.close(pend.rst)
			return
		}
		out := b
		if hello {
			if r := p.rewriteHelloReply(m, pc.l); r != nil {
				out = r
			}
		}
		if err := pc.writeClient(out); err != nil {
			return
		}
		p.stats.replies.Add(1)
	}
}

// Overload error as a server's ingress limiter sends it.
const (
	codeOverloaded     = 462
	codeNameOverloaded = "IngressRequestRateLimitExceeded"
)

// injectedReply builds the error or shed reply to in, in the protocol the
// request used.
func (p *Proxy) injectedReply(in *inbound, a Action) []byte {
	var doc bson.D
	if a.Kind == Shed {
		doc = bson.D{
			{Key: "ok", Value: 0.0},
			{Key: "errmsg", Value: "request rate limit exceeded (injected by faultproxy)"},
			{Key: "code", Value: int32(codeOverloaded)},
			{Key: "codeName", Value: codeNameOverloaded},
			{Key: "errorLabels", Value: bson.A{"SystemOverloadedError", "RetryableError"}},
		}
		if a.BaseBackoffMS > 0 {
			doc = append(doc, bson.E{Key: "baseBackoffMS", Value: a.BaseBackoffMS})
		}
	} else {
		e := a.Error
		msg := e.Message
		if msg == "" {
			msg = "error injected by faultproxy"
		}
		doc = bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: e.Code}}
		if e.CodeName != "" {
			doc = append(doc, bson.E{Key: "codeName", Value: e.CodeName})
		}
		if len(e.Labels) > 0 {
			labels := make(bson.A, len(e.Labels))
			for i, l := range e.Labels {
				labels[i] = l
			}
			doc = append(doc, bson.E{Key: "errorLabels", Value: labels})
		}
	}
	body, err := bson.Marshal(doc)
	if err != nil {
		// Only strings and numbers go in; Marshal cannot fail on them.
		body = bson.Raw{5, 0, 0, 0, 0}
	}
	reqID := p.nextReqID.Add(1)
	if in.msg.Query != nil {
		return wire.AppendReply(nil, reqID, in.msg.Header.RequestID, &wire.Reply{Documents: []bson.Raw{body}})
	}
	return wire.AppendMsg(nil, reqID, in.msg.Header.RequestID, &wire.Msg{Body: body})
}
