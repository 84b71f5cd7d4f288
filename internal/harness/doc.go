// Package harness is where the test harnesses that sit above the client
// live: they import the root package, so they cannot sit beside the core
// packages under internal/, whose imports all point down (wire → conn →
// pool → topology → exec → the root API).
//
//   - spectest runs MongoDB's unified-format specification tests against
//     the client and mongosim.
//   - clientbench measures the client side by side with the official Go
//     driver.
package harness
