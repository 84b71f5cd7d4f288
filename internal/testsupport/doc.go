// Package testsupport holds the helpers the packages' tests share: a
// context bounded by the test, the location of the MongoDB specifications'
// JSON tests, and closing a client or topology when the test ends.
//
// Spec tests skip, never fail, when the specifications are not present:
// they live outside the repository (SPEC_TESTS, or ../shared/specs beside
// the module root).
//
// It imports nothing of the module, so that any package's internal tests
// can use it without an import cycle.
package testsupport
