// Package expr compiles and evaluates MongoDB aggregation expressions over
// in-memory bson.D documents: field paths ("$a.b", which traverse arrays the
// way aggregation does), system variables ($$ROOT, $$CURRENT, $$NOW,
// $$REMOVE), user variables bound by $let, $map, $filter and $reduce, object
// and array expressions, literals, and the operator documents {$op: args}.
//
// A missing field evaluates to Missing, which is distinct from BSON null: the
// aggregation stages omit a field whose expression is Missing but keep a null.
// Errors are *cmderr.Error values with the codes and messages the real server
// uses; an operator the server has but mongosim does not is reported with
// cmderr.Unsupported instead of being answered wrongly, and an unknown one
// with InvalidPipelineOperator (168).
package expr
