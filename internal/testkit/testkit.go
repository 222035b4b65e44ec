// Package testkit is the map of what the tests run on: real parts,
// started on demand, on loopback only, and stopped when the test binary
// ends.
//
//	pgtest      a throwaway PostgreSQL cluster from the machine's initdb and
//	            postgres (localpg; or TEST_DATABASE_URL), on a tmpfs where there
//	            is one, a fresh database per test from a migrated template;
//	            the platform's schema on request; Freeze and Thaw of the cluster
//	s3test      moto_server, a fresh bucket per test; Freeze and Thaw;
//	            Objects, the bucket read around the code under test;
//	            PartProxy (counts and holds part PUTs) and IAMProxy (judges
//	            each S3 call by its signer's policy, as AWS does)
//	apptest     the whole service (config, pool, store, API) in a test,
//	            served on loopback, with tokens and helpers to read its state;
//	            behind PgBouncer on request
//	pgbouncertest a real PgBouncer in transaction mode in front of a test's
//	            database, started and stopped by the test
//	lambdatest  a function built as Lambda builds it, driven through a
//	            Runtime API of its own (hello: its hello-world baseline),
//	            and Lambda's Invoke API in front of it (ServeInvoke)
//	gatewaytest a loopback REST API Gateway in front of every function
//	            binary, each route invoking the function httpapi.Routes
//	            names: clients run against the binaries as against AWS
//	samtemplate template.yaml (its Fn::ForEach loops expanded as
//	            CloudFormation does) and lambda.mk as the tests read them
//	faultkit    requests under faults: a dependency frozen (SIGSTOP) while
//	            calls run, and the answers they must get
//	cptest      the control plane's session check, a real HTTP stand-in
//	pgtrace     the round trips a pool makes, counted
//	delayproxy  latency in front of a server (the benchmarks' Postgres)
//	throttle    a per-connection bandwidth limit in front of a server
//	tcpproxy    the loopback proxy delayproxy and throttle share
//
// Each server starts the first time a test asks for it (pgtest.MustURL,
// s3test.MustStart, apptest.NewServer, lambdatest.Build), once per test
// binary. One way stops them all: a package whose tests use any of them
// has
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
package testkit

import (
	"os"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// Main runs the tests, then stops whatever they started (the Postgres
// cluster, moto, the Lambda builds) and runs cleanup, and exits with the
// tests' code.
func Main(m *testing.M, cleanup ...func()) {
	code := m.Run()
	for _, f := range cleanup {
		f()
	}
	lambdatest.Cleanup()
	s3test.Stop()
	pgtest.Stop()
	os.Exit(code)
}
