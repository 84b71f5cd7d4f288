package query

import "github.com/sturdy-go/sturdy/mongosim/internal/expr"

// The regex expression operators ($regexMatch, $regexFind, $regexFindAll)
// translate patterns as queries do; package expr cannot import this one, so
// it is handed the compiler here.
func init() { expr.RegexCompiler = CompileRegex }
