// Package testcert makes the throwaway TLS certificates tests need: one
// self-signed certificate per call, which serves as its own CA, so a test
// can run a TLS server and a client that trusts it without files on disk.
//
// It is for tests only; the keys are generated per call and never stored.
package testcert
