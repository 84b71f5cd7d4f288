// Command sturdy is the project's command line:
//
//	sturdy demo    the resilient-applications article's counter workload under injected faults, strategy by strategy
//	sturdy sim     run mongosim, the in-memory MongoDB-compatible server, as a process
//	sturdy proxy   a MongoDB-aware fault-injection proxy in front of a real deployment
//	sturdy soak    a chaos run proving that nothing is lost, applied twice or stuck (package soak)
//	sturdy bench   benchmarks against the official driver: bench overload, faults, failover and connect
//	sturdy version the module version and commit the binary was built from
//
// Run "sturdy <command> -h" for a command's flags. The subcommands table in
// main.go lists them; docs/ has a page for each.
package main
