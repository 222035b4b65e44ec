// Package bench holds the service's benchmarks, each measured against a
// baseline in the same run on the same database: the upload and content
// handlers against raw pgx statements of the same bytes, the service over
// loopback HTTP against the floor (the least net/http code running the
// same SQL: BenchmarkFloor), one multi-file upload against single ones,
// the list at growing table sizes, a sweep of a large backlog with
// uploads running beside it, and the heap a handler call needs for its
// largest inline case. `make bench` runs them (through
// internal/tools/benchreport) and prints the ratios against their targets.
//
// Everything is set up inside the benchmark functions: `go test` without
// -bench runs none of it.
package bench
