// Package clientbench measures the sturdy client against the official Go
// driver (go.mongodb.org/mongo-driver/v2/mongo) doing the same work: insertOne
// of a small document, findOne by _id, updateOne, insertMany of 1 000 small
// documents and a find that drains 10 000 documents, each from 1 and from 32
// goroutines.
//
// Two servers are measured. "Canned" is a blackpipe server whose replies are
// marshalled once up front, so what remains is the client's own cost;
// "Sim" is mongosim, a server that really does the work. Both run in a child
// process (the test binary re-executed), so allocs/op, B/op and the
// cpu-ns/op metric (user+system CPU of the benchmark process per operation)
// count the client alone. Benchmarks are named
// Benchmark{Canned,Sim}/<op>/g<goroutines>/{sturdy,official}, ready for
// benchstat.
//
//	go test -run '^$' -bench . -benchmem ./internal/harness/clientbench
//
// BenchmarkSimServer turns the measurement around: the official driver is
// the client and the metric is mongosim's own CPU per document (its child
// process's rusage), for insert of 1 000-document batches and a find of
// 10 000; CLIENTBENCH_SERVE_CPUPROFILE=<file> makes the child write a CPU
// profile of the server, CLIENTBENCH_SERVE_MUTEXPROFILE and
// CLIENTBENCH_SERVE_BLOCKPROFILE its lock contention and blocking, and
// CLIENTBENCH_SERVE_ALLOCPROFILE its heap allocations (any benchmark
// against mongosim).
//
// report.go (go run ./internal/harness/clientbench/report.go) runs them and prints a
// markdown table of sturdy/official ratios.
//
// The package has no non-test code: the official driver may only appear in
// tests.
package clientbench
