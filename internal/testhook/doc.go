// Package testhook holds the few knobs that tests and the demo may turn but
// applications must not: the SDAM spec fixes the minimum time between two
// checks of a server at 500 ms and forbids making it configurable, so it is
// no Option; failover-heavy tests and the demo shorten it here so that each
// rediscovery does not cost half a second. SessionDirty exposes a session
// state only the unified test runner asserts.
package testhook
