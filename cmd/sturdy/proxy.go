package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sturdy-go/sturdy/faultproxy"
)

// proxyFlags are the flags of sturdy proxy: where to listen and forward,
// a rules file, and one rule given on the command line.
type proxyFlags struct {
	upstream, listen, advertise, rulesFile string
	seed                                   int64
	noDiscovery, quiet                     bool
	upstreamTLS, upstreamInsecure          bool

	// The command-line rule.
	ruleName, command, namespace, appName string
	connection                            int64
	action                                string
	probability                           float64
	times, skip                           int
	ruleSeed                              int64
	delay, replyDelay                     time.Duration
	errCode                               int
	errCodeName, errMessage, errLabels    string
	backoffMS                             int
	rst                                   bool
}

func (f *proxyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.upstream, "upstream", "", "server(s) to front: host:port[,host:port...] or a mongodb:// connection string (required)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "address of the first listener; with a fixed port, member i listens on port+i")
	fs.StringVar(&f.advertise, "advertise-host", "", "host to put in the connection string and hello replies (default: the listen host)")
	fs.StringVar(&f.rulesFile, "rules", "", "JSON rules file (see the faultproxy package); the command-line rule, if any, comes after its rules")
	fs.Int64Var(&f.seed, "seed", 0, "seed for rule probabilities (default: the rules file's seed, else 1)")
	fs.BoolVar(&f.noDiscovery, "no-discovery", false, "do not ask the upstream for its replica-set members at start")
	fs.BoolVar(&f.quiet, "quiet", false, "do not log fired rules")
	fs.BoolVar(&f.upstreamTLS, "upstream-tls", false, "connect to the upstream with TLS")
	fs.BoolVar(&f.upstreamInsecure, "upstream-tls-insecure", false, "with -upstream-tls, do not verify the server's certificate")

	fs.StringVar(&f.action, "action", "", "action of the command-line rule: drop-reply, drop-request, reset, delay, error, shed")
	fs.StringVar(&f.ruleName, "rule-name", "", "name of the command-line rule")
	fs.StringVar(&f.command, "rule-command", "", "command names the rule matches, comma-separated (case-insensitive)")
	fs.StringVar(&f.namespace, "rule-namespace", "", "database or db.collection the rule matches")
	fs.StringVar(&f.appName, "rule-app-name", "", "client appName the rule matches")
	fs.Int64Var(&f.connection, "rule-connection", 0, "proxy connection id the rule matches (1 is the first connection)")
	fs.Float64Var(&f.probability, "probability", 0, "chance the rule fires on a matching request, in (0,1] (default 1)")
	fs.IntVar(&f.times, "times", 0, "fire at most this many times (0: no limit)")
	fs.IntVar(&f.skip, "skip", 0, "let this many matching requests through first")
	fs.Int64Var(&f.ruleSeed, "rule-seed", 0, "seed of the command-line rule alone (default: from -seed)")
	fs.DurationVar(&f.delay, "delay", 0, "wait this long before acting (delay: before forwarding)")
	fs.DurationVar(&f.replyDelay, "reply-delay", 0, "delay and drop-reply: wait this long after the server replied")
	fs.IntVar(&f.errCode, "error-code", 0, "error: the code to answer with")
	fs.StringVar(&f.errCodeName, "error-code-name", "", "error: the codeName")
	fs.StringVar(&f.errMessage, "error-message", "", "error: the errmsg")
	fs.StringVar(&f.errLabels, "error-labels", "", "error: errorLabels, comma-separated (e.g. RetryableWriteError)")
	fs.IntVar(&f.backoffMS, "backoff-ms", 0, "shed: baseBackoffMS to send")
	fs.BoolVar(&f.rst, "rst", false, "drop-reply, drop-request: close with a TCP reset")
}

// ruleFlags names the flags that only make sense with -action.
var ruleFlags = []string{"rule-name", "rule-command", "rule-namespace", "rule-app-name", "rule-connection", "probability",
	"times", "skip", "rule-seed", "delay", "reply-delay", "error-code", "error-code-name", "error-message", "error-labels", "backoff-ms", "rst"}

// options turns the flags into proxy options; set says which flags the
// command line gave.
func (f *proxyFlags) options(set map[string]bool) (faultproxy.Options, error) {
	var o faultproxy.Options
	ups, err := parseUpstreams(f.upstream)
	if err != nil {
		return o, err
	}
	o.Upstreams = ups
	o.Listen = f.listen
	o.AdvertiseHost = f.advertise
	o.NoDiscovery = f.noDiscovery
	if f.upstreamInsecure && !f.upstreamTLS {
		return o, fmt.Errorf("-upstream-tls-insecure needs -upstream-tls")
	}
	if f.upstreamTLS {
		o.UpstreamTLS = &tls.Config{InsecureSkipVerify: f.upstreamInsecure}
	}
	if f.rulesFile != "" {
		rs, err := faultproxy.LoadRulesFile(f.rulesFile)
		if err != nil {
			return o, err
		}
		o.Rules, o.Seed = rs.Rules, rs.Seed
	}
	if set["seed"] {
		o.Seed = f.seed
	}
	if f.action == "" {
		for _, name := range ruleFlags {
			if set[name] {
				return o, fmt.Errorf("-%s describes the command-line rule, which needs -action", name)
			}
		}
		return o, nil
	}
	kind, err := faultproxy.ParseActionKind(f.action)
	if err != nil {
		return o, fmt.Errorf("-action: %w", err)
	}
	r := faultproxy.Rule{
		Name: f.ruleName,
		Match: faultproxy.Match{
			Commands:     splitList(f.command),
			Namespace:    f.namespace,
			AppName:      f.appName,
			ConnectionID: f.connection,
		},
		Action: faultproxy.Action{
			Kind: kind, Delay: f.delay, ReplyDelay: f.replyDelay, RST: f.rst,
			Error: faultproxy.CommandError{Code: int32(f.errCode), CodeName: f.errCodeName, Message: f.errMessage, Labels: splitList(f.errLabels)},
		},
		Probability: f.probability, Times: f.times, Skip: f.skip, Seed: f.ruleSeed,
	}
	if f.backoffMS < 0 || f.backoffMS > 1<<30 {
		return o, fmt.Errorf("-backoff-ms %d is out of range", f.backoffMS)
	}
	r.Action.BaseBackoffMS = int32(f.backoffMS)
	if kind != faultproxy.Error && (set["error-code"] || set["error-code-name"] || set["error-message"] || set["error-labels"]) {
		return o, fmt.Errorf("-error-* flags need -action error, not %s", kind)
	}
	if r.Name == "" {
		r.Name = "command line"
	}
	o.Rules = append(o.Rules, r)
	if err := faultproxy.ValidateRules(o.Rules); err != nil {
		return o, err
	}
	return o, nil
}

// parseUpstreams accepts "h:p,h:p" or a mongodb:// connection string (its
// hosts; options are ignored). A host without a port gets 27017.
func parseUpstreams(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("-upstream is required")
	}
	if rest, ok := strings.CutPrefix(s, "mongodb://"); ok {
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			rest = rest[i+1:]
		}
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			rest = rest[:i]
		}
		s = rest
	} else if strings.Contains(s, "://") {
		return nil, fmt.Errorf("-upstream %q: only host:port lists and mongodb:// connection strings are supported", s)
	}
	var out []string
	for _, h := range splitList(s) {
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h += ":27017"
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-upstream %q names no host", s)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parseProxyArgs parses sturdy proxy's command line into proxy options.
func parseProxyArgs(args []string, stderr io.Writer) (faultproxy.Options, proxyFlags, error) {
	fs := flag.NewFlagSet("sturdy proxy", flag.ContinueOnError)
	var f proxyFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sturdy proxy -upstream host:port [flags]")
		fmt.Fprintln(fs.Output(), "\nA MongoDB-aware fault-injection proxy. It prints the connection string to use, then")
		fmt.Fprintln(fs.Output(), "serves until interrupted. Example: lose 20% of update replies, at most 5, after the write applied:")
		fmt.Fprintln(fs.Output(), "  sturdy proxy -upstream localhost:27017 -rule-command update -action drop-reply -probability 0.2 -times 5 -seed 1")
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return faultproxy.Options{}, f, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	o, err := f.options(set)
	if err != nil {
		fmt.Fprintf(stderr, "sturdy proxy: %v\n", err)
		return o, f, errUsage
	}
	return o, f, nil
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, f, err := parseProxyArgs(args, stderr)
	if err != nil {
		return err
	}
	var logMu sync.Mutex
	if !f.quiet {
		o.Logf = func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}
	p, err := faultproxy.Start(ctx, o)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintln(stdout, p.URI())
	logMu.Lock()
	for _, l := range p.Listeners() {
		fmt.Fprintf(stderr, "listening on %s for %s\n", l.Addr, l.Upstream)
	}
	for i, r := range o.Rules {
		fmt.Fprintf(stderr, "rule %d: %s\n", i, describeRule(r))
	}
	logMu.Unlock()
	<-ctx.Done()
	p.Close()
	logMu.Lock()
	defer logMu.Unlock()
	st := p.Stats()
	fmt.Fprintf(stderr, "connections %d, requests %d, forwarded %d, injected replies %d, dropped replies %d\n",
		st.ConnsAccepted, st.Requests, st.Forwarded, st.Injected, st.RepliesDropped)
	for _, c := range p.Counts() {
		fmt.Fprintf(stderr, "%s: matched %d, fired %d\n", c.Name, c.Matched, c.Fired)
	}
	return nil
}

// describeRule is a one-line summary of a rule for the start-up banner.
func describeRule(r faultproxy.Rule) string {
	var parts []string
	if r.Name != "" {
		parts = append(parts, fmt.Sprintf("%q", r.Name))
	}
	parts = append(parts, r.Action.Kind.String())
	m := r.Match
	if len(m.Commands) > 0 {
		parts = append(parts, "commands="+strings.Join(m.Commands, ","))
	}
	if m.Namespace != "" {
		parts = append(parts, "namespace="+m.Namespace)
	}
	if m.AppName != "" {
		parts = append(parts, "appName="+m.AppName)
	}
	if m.ConnectionID != 0 {
		parts = append(parts, fmt.Sprintf("connection=%d", m.ConnectionID))
	}
	a := r.Action
	if a.Delay > 0 {
		parts = append(parts, "delay="+a.Delay.String())
	}
	if a.ReplyDelay > 0 {
		parts = append(parts, "replyDelay="+a.ReplyDelay.String())
	}
	if a.Kind == faultproxy.Error {
		parts = append(parts, fmt.Sprintf("code=%d", a.Error.Code))
		if len(a.Error.Labels) > 0 {
			parts = append(parts, "labels="+strings.Join(a.Error.Labels, ","))
		}
	}
	if a.BaseBackoffMS > 0 {
		parts = append(parts, fmt.Sprintf("baseBackoffMS=%d", a.BaseBackoffMS))
	}
	if a.RST {
		parts = append(parts, "rst")
	}
	if r.Probability > 0 && r.Probability < 1 {
		parts = append(parts, fmt.Sprintf("probability=%g", r.Probability))
	}
	if r.Skip > 0 {
		parts = append(parts, fmt.Sprintf("skip=%d", r.Skip))
	}
	if r.Times > 0 {
		parts = append(parts, fmt.Sprintf("times=%d", r.Times))
	}
	return strings.Join(parts, " ")
}
