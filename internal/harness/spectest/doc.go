// Package spectest runs the MongoDB unified test format (the JSON files under
// the specifications' tests/ directories that carry a schemaVersion) against
// the sturdy client: it creates the client, database, collection and session
// entities a file describes, seeds initial data through an internal client,
// runs each operation through sturdy's public API, and checks results,
// errors, observed command and pool events and the final collection contents
// with the format's matching rules ($$exists, $$type, $$unsetOrMatches and
// the rest).
//
// TestUnified reads the test directories from SPEC_TESTS and runs them
// against an embedded mongosim deployment (or MONGODB_URI). Tests that
// cannot apply — a topology or server version the deployment does not have,
// an API sturdy does not have such as the Stable API or the deprecated
// count helper — are skipped with their reason; known failures are listed, with reasons, in
// expected_failures.go.
package spectest
