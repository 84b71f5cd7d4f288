// Package collation parses MongoDB collation documents ({locale, strength,
// caseLevel, ...}) and compares strings under them with
// golang.org/x/text/collate, which implements the Unicode Collation
// Algorithm with CLDR tailorings as ICU (mongod's collation library) does.
//
// A *Collation implements value.Collator; the simple collation is a nil
// *Collation, so code paths that see no collation pay nothing for it.
package collation
