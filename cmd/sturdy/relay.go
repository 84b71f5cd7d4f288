package main

import (
	"net"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

// faultPlan says what the relay does to the write commands of the operation
// currently running. The demo sets one plan per operation, so every fault is
// tied to an exact operation and the run is reproducible.
type faultPlan struct {
	// dropReplyAt is the 0-based index of the write, within this operation,
	// whose reply is swallowed after the server applied it (the connection
	// is then closed): a transient network error after the write. -1: none.
	dropReplyAt int
	// dropRequestAt is the index of the write that is lost on its way to
	// the server (the connection is closed): a transient network error
	// before the write. -1: none.
	dropRequestAt int
	// outage drops every write before it reaches the server.
	outage bool
	// commandError answers every write with a non-retryable command error.
	commandError bool
	// overloaded answers this many writes with error 462 and the overload
	// labels before letting writes through.
	overloaded int
}

var noFaults = faultPlan{dropReplyAt: -1, dropRequestAt: -1}

// relay forwards wire messages between clients and one upstream server and
// injects the current plan's faults into write commands. It understands
// just enough of the protocol to find command names.
type relay struct {
	upstream string
	ln       net.Listener

	mu     sync.Mutex
	plan   faultPlan
	writes int // writes seen under the current plan
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startRelay(upstream string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{upstream: upstream, ln: ln, plan: noFaults, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// setPlan installs the plan for the next operation.
func (r *relay) setPlan(p faultPlan) {
	r.mu.Lock()
	r.plan, r.writes = p, 0
	r.mu.Unlock()
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.conns == nil {
			return false
		}
		r.conns[c] = struct{}{}
	} else {
		delete(r.conns, c)
	}
	return true
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c, true) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.track(c, false)
			defer c.Close()
			r.serve(c)
		}()
	}
}

type relayAction int

const (
	forward relayAction = iota
	forwardDropReply
	dropRequest
	replyCommandError
	replyOverloaded
)

// decide picks the action for one message from the client.
func (r *relay) decide(msg []byte) (relayAction, int32) {
	m, err := wire.Decode(msg, 0)
	if err != nil || m.Msg == nil {
		return forward, 0
	}
	switch wire.CommandName(m.Msg.Body) {
	case "update", "insert", "delete", "findAndModify":
	default:
		return forward, m.Header.RequestID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.writes
	r.writes++
	p := &r.plan
	switch {
	case p.outage, p.dropRequestAt == i:
		return dropRequest, m.Header.RequestID
	case p.commandError:
		return replyCommandError, m.Header.RequestID
	case p.overloaded > 0:
		p.overloaded--
		return replyOverloaded, m.Header.RequestID
	case p.dropReplyAt == i:
		return forwardDropReply, m.Header.RequestID
	}
	return forward, m.Header.RequestID
}

func (r *relay) serve(client net.Conn) {
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		return
	}
	if !r.track(up, true) {
		up.Close()
		return
	}
	defer r.track(up, false)
	defer up.Close()
	var in, out []byte
	for {
		in, err = wire.ReadMessage(client, in[:0], 0)
		if err != nil {
			return
		}
		action, reqID := r.decide(in)
		switch action {
		case dropRequest:
			return
		case replyCommandError:
			if writeError(client, reqID, bson.D{
				{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "not authorized on demo to execute command"},
				{Key: "code", Value: int32(13)}, {Key: "codeName", Value: "Unauthorized"},
			}) != nil {
				return
			}
			continue
		case replyOverloaded:
			if writeError(client, reqID, bson.D{
				{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "request rate limit exceeded"},
				{Key: "code", Value: int32(462)}, {Key: "codeName", Value: "IngressRequestRateLimitExceeded"},
				{Key: "errorLabels", Value: bson.A{"SystemOverloadedError", "RetryableError"}},
			}) != nil {
				return
			}
			continue
		}
		if _, err := up.Write(in); err != nil {
			return
		}
		out, err = wire.ReadMessage(up, out[:0], 0)
		if err != nil {
			return
		}
		if action == forwardDropReply {
			return // the server applied the write; the client never hears of it
		}
		if _, err := client.Write(out); err != nil {
			return
		}
	}
}

func writeError(c net.Conn, responseTo int32, doc bson.D) error {
	body, err := bson.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = c.Write(wire.AppendMsg(nil, 0, responseTo, &wire.Msg{Body: body}))
	return err
}
