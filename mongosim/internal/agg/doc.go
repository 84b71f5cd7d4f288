// Package agg compiles and runs MongoDB aggregation pipelines over in-memory
// bson.D documents: $match (through package query), $project, $addFields/$set,
// $unset, $group, $sort, $limit, $skip, $count, $unwind, $replaceRoot,
// $replaceWith, $sortByCount, $lookup, $facet, $unionWith, $documents,
// $setWindowFields, $densify, $fill, $redact, and the
// write stages $out and $merge, which hand their output to a Catalog.
//
// A pipeline is compiled once and is immutable; Run never modifies its input
// documents, which may be a collection's stored documents. Errors are
// *cmderr.Error values shaped like the real server's; stages the server has but
// mongosim does not fail with cmderr.Unsupported rather than answering wrongly.
package agg
