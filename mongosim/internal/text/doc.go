// Package text is mongosim's full-text search: what mongod 8.0's text
// indexes (textIndexVersion 3) and the $text query operator do with
// strings, as pure functions over in-memory documents.
//
//   - Languages (Lookup): mongod's fifteen languages, their two-letter
//     aliases and "none". Stemming uses the Snowball algorithms of
//     github.com/kljensen/snowball, which has english, french, hungarian,
//     norwegian, russian, spanish and swedish; the other languages mongod
//     knows (danish, dutch, finnish, german, italian, portuguese, romanian,
//     turkish) are reported as ErrUnsupportedLanguage, never stemmed wrongly.
//   - Tokenising (Tokenize): words split at the Unicode delimiters mongod's
//     version 3 tokenizer uses (White_Space, Dash, Hyphen, Quotation_Mark,
//     Terminal_Punctuation, Pattern_Syntax, Sentence_Terminal; in English the
//     apostrophe is part of a word), lower-cased, stop words dropped (mongod's
//     lists, in stopwords/), stemmed, then diacritics stripped.
//   - Queries (ParseQuery): a $search string into positive and negated terms
//     and phrases, as mongod's query parser splits it.
//   - Index specs (ParseSpec): key pattern, weights, default_language,
//     language_override, the wildcard "$**", and the normalized spec
//     listIndexes reports.
//   - Scoring (Spec.Score): the per-term scores mongod stores in its index
//     keys: per string, a term seen n times counts 1 + 1/2 + ... + 1/2^(n-1),
//     times the field weight, times (0.5 + 0.5 * n / tokens in the string),
//     times 1.1 when the term is the whole string; the scores of the strings
//     of a document add up. A document's textScore for a query is the sum of
//     its scores for the query's distinct positive terms.
//   - Matching (Spec.Matches): phrases, negations and case or diacritic
//     sensitive terms, checked on the documents the index yields.
//   - Index: an inverted index from term to documents and their scores.
package text
