// Package interop runs the Node.js driver interop suite (the JavaScript
// files in this directory) from `go test`, so CI's `go test ./...` proves
// mongosim against a driver this project did not write: the official
// `mongodb` npm package, pinned in package-lock.json.
package interop
