package spectest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Summary counts test outcomes per spec directory.
type Summary struct {
	mu       sync.Mutex
	counts   map[string]*Counts
	failures []string
}

// Fail records a failed test, for the SPEC_FAILURES listing.
func (s *Summary) Fail(file, test string, err error) {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf("%s\t%s\t%s", file, test, msg))
}

// Failures lists the failed tests, one per line: file, test, error.
func (s *Summary) Failures() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.failures, "\n") + "\n"
}

// Counts are the outcomes of one directory (or of all).
type Counts struct {
	Passed, Failed, Skipped, KnownFailures int
	// SkipReasons counts skips by reason.
	SkipReasons map[string]int
}

func (c Counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}

// Add records one outcome for dir. knownFailure marks a skip that is a
// listed known failure.
func (s *Summary) Add(dir string, o Outcome, knownFailure bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]*Counts{}
	}
	c := s.counts[dir]
	if c == nil {
		c = &Counts{SkipReasons: map[string]int{}}
		s.counts[dir] = c
	}
	switch {
	case o.Skipped:
		c.Skipped++
		if knownFailure {
			c.KnownFailures++
		}
		c.SkipReasons[reasonClass(o.Reason)]++
	case o.Err != nil:
		c.Failed++
	default:
		c.Passed++
	}
}

// reasonClass shortens a skip reason for grouping.
func reasonClass(r string) string {
	if strings.HasPrefix(r, "known failure") {
		return "known failure"
	}
	if i := strings.Index(r, " ("); i > 0 && strings.HasPrefix(r, "not supported") {
		r = r[:i]
	}
	if strings.HasPrefix(r, "runOnRequirements") {
		switch {
		case strings.Contains(r, "topology"):
			return "runOnRequirements: topology"
		case strings.Contains(r, "ServerVersion"):
			return "runOnRequirements: server version"
		}
		return "runOnRequirements: other"
	}
	if len(r) > 100 {
		r = r[:100]
	}
	return r
}

// Dirs returns the directories with outcomes, sorted.
func (s *Summary) Dirs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for d := range s.counts {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Dir returns the counts of one directory.
func (s *Summary) Dir(d string) Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.counts[d]; c != nil {
		return *c
	}
	return Counts{}
}

// Total sums every directory.
func (s *Summary) Total() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := Counts{SkipReasons: map[string]int{}}
	for _, c := range s.counts {
		t.Passed += c.Passed
		t.Failed += c.Failed
		t.Skipped += c.Skipped
		t.KnownFailures += c.KnownFailures
		for r, n := range c.SkipReasons {
			t.SkipReasons[r] += n
		}
	}
	return t
}

// Report renders a per-directory table (Markdown) and the closing line.
func (s *Summary) Report() string {
	var b strings.Builder
	b.WriteString("| directory | passed | failed | skipped | of which known failures |\n|---|---|---|---|---|\n")
	for _, d := range s.Dirs() {
		c := s.Dir(d)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", d, c.Passed, c.Failed, c.Skipped, c.KnownFailures)
	}
	t := s.Total()
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d |\n\nSkip reasons:\n\n", t.Passed, t.Failed, t.Skipped, t.KnownFailures)
	var reasons []string
	for r := range t.SkipReasons {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool { return t.SkipReasons[reasons[i]] > t.SkipReasons[reasons[j]] })
	for _, r := range reasons {
		fmt.Fprintf(&b, "- %d × %s\n", t.SkipReasons[r], r)
	}
	fmt.Fprintf(&b, "\n%s\n", t.String())
	return b.String()
}
