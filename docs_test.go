package sturdy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documentation a reader follows from README.md into docs/ must not
// send them anywhere that does not exist: every relative link resolves to
// a file of the repository (and a heading, when it names one), and nothing
// refers to material outside it.

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	// References that mean something only to whoever wrote them.
	outsideRef = regexp.MustCompile(`(?i)\bseed[ -]?0\d\d\b|\bissue #?\d+\b|\.\./shared\b`)
)

func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, files...)
}

func TestDocsLinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
			}
			abs, err := filepath.Abs(target)
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %q points outside the repository", f, link)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %q: %v", f, link, err)
				continue
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = headingAnchors(t, target)
			}
			if !anchors[target][anchor] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", f, link, target)
			}
		}
	}
}

// TestDocsReferNothingOutside checks every markdown file and every Go
// comment of the module (test files included) for references only their
// writer could follow: "seed 002", "issue 4", ../shared.
func TestDocsReferNothingOutside(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", "dist", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		isGo := strings.HasSuffix(path, ".go")
		if !isGo && !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if isGo {
				// Comments only: a Go file may name ../shared/specs as a
				// default path (internal/testsupport), which is behaviour.
				_, comment, ok := strings.Cut(line, "//")
				if !ok || strings.Contains(comment, "../shared") {
					continue
				}
				line = comment
			}
			for _, m := range outsideRef.FindAllString(line, -1) {
				t.Errorf("%s:%d: %q refers to something outside the repository; name the specification, article or file instead", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown file: lower case, punctuation dropped, spaces as hyphens, and
// -1, -2… after repeats.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var sb strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				sb.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				sb.WriteRune(r)
			}
		}
		a := sb.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
