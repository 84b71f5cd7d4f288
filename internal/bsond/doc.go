// Package bsond encodes and decodes bson.D documents without reflection,
// giving the bytes and values bson.Marshal and bson.Unmarshal give: the
// servers (blackpipe, mongosim) spend most of a large reply's or a large
// insert's CPU in the bson package's codec lookups otherwise. Types it does
// not handle itself go to the bson package, so callers never see a
// difference but the cost.
package bsond
