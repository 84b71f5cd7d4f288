package text

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/kljensen/snowball/english"
	"github.com/kljensen/snowball/french"
	"github.com/kljensen/snowball/hungarian"
	"github.com/kljensen/snowball/norwegian"
	"github.com/kljensen/snowball/russian"
	"github.com/kljensen/snowball/spanish"
	"github.com/kljensen/snowball/swedish"
)

// ErrUnknownLanguage is a language mongod does not know.
var ErrUnknownLanguage = errors.New("unknown text search language")

// ErrUnsupportedLanguage is a language mongod knows but mongosim cannot stem.
var ErrUnsupportedLanguage = errors.New("text search language not supported by mongosim")

// Language is one text search language: its stemmer and stop words.
type Language struct {
	// Name is the canonical name ("english", "none").
	Name string
	stem func(string, bool) string
	stop map[string]bool
}

//go:embed stopwords/*.txt
var stopFiles embed.FS

type langDef struct {
	name, alias string
	stem        func(string, bool) string // nil: mongod has it, mongosim cannot stem it
}

// mongod 8.0's text search languages (textIndexVersion 3).
var langDefs = []langDef{
	{"danish", "da", nil},
	{"dutch", "nl", nil},
	{"english", "en", english.Stem},
	{"finnish", "fi", nil},
	{"french", "fr", french.Stem},
	{"german", "de", nil},
	{"hungarian", "hu", hungarian.Stem},
	{"italian", "it", nil},
	{"norwegian", "nb", norwegian.Stem},
	{"portuguese", "pt", nil},
	{"romanian", "ro", nil},
	{"russian", "ru", russian.Stem},
	{"spanish", "es", spanish.Stem},
	{"swedish", "sv", swedish.Stem},
	{"turkish", "tr", nil},
}

var (
	languages   = map[string]*Language{} // by lower-case name and alias; nil: unsupported
	knownNames  = map[string]string{}    // lower-case name or alias → canonical name
	noneLang    = &Language{Name: "none", stop: map[string]bool{}}
	englishLang *Language
)

func init() {
	languages["none"], knownNames["none"] = noneLang, "none"
	for _, d := range langDefs {
		knownNames[d.name], knownNames[d.alias] = d.name, d.name
		if d.stem == nil {
			continue
		}
		l := &Language{Name: d.name, stem: d.stem, stop: loadStopWords(d.name)}
		languages[d.name], languages[d.alias] = l, l
	}
	englishLang = languages["english"]
}

func loadStopWords(name string) map[string]bool {
	f, err := stopFiles.Open("stopwords/" + name + ".txt")
	if err != nil {
		panic(fmt.Sprintf("text: no stop words for %s: %v", name, err)) // a build defect, not input
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if w := strings.TrimSpace(sc.Text()); w != "" {
			out[w] = true
		}
	}
	return out
}

// Lookup finds a language by name or alias, case-insensitively, as mongod
// does. A language mongod does not know is ErrUnknownLanguage; one mongosim
// cannot stem is ErrUnsupportedLanguage.
func Lookup(name string) (*Language, error) {
	key := strings.ToLower(name)
	if l := languages[key]; l != nil {
		return l, nil
	}
	if canon, ok := knownNames[key]; ok {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedLanguage, canon)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownLanguage, name)
}

// English is the default language of text indexes.
func English() *Language { return englishLang }

// IsStopWord reports whether the lower-cased word is one of the language's
// stop words.
func (l *Language) IsStopWord(w string) bool { return l.stop[w] }

// Stem stems a lower-case word; "none" leaves it as it is. A stemmer that
// fails on odd input leaves the word unstemmed rather than failing the
// operation.
func (l *Language) Stem(w string) (out string) {
	if l.stem == nil {
		return w
	}
	defer func() {
		if recover() != nil {
			out = w
		}
	}()
	return l.stem(w, true)
}
