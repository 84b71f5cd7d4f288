// Package packaging holds what makes `sturdy sim` installable outside Go —
// the npm packages (npm/: @sturdy-go/sim, mongodb-memory-server's API, and
// one binary package per platform) and the Python wheel with its pytest
// plugin (python/) — and the test that proves them the way users get them:
// it runs scripts/release --host-only, installs the packed tarballs and the
// wheel into fresh projects, and runs their suites with the official
// mongodb Node.js driver and pymongo.
package packaging
