// Command sturdy is the project's command line:
//
//	sturdy demo    the exactly-once counter workload under injected faults, strategy by strategy
//	sturdy sim     run mongosim, the in-memory MongoDB-compatible server, as a process
//	sturdy proxy   a MongoDB-aware fault-injection proxy in front of a real deployment
//	sturdy bench   benchmarks: "bench overload" measures retries against an overloaded server
//	sturdy version the module version and commit the binary was built from
//
// Run "sturdy <command> -h" for a command's flags.
package main
