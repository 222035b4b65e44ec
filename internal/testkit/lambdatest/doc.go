// Package lambdatest runs real Lambda function binaries in tests: it builds
// a function the way Lambda builds it (static linux binary named bootstrap,
// -tags lambda.norpc) and drives the process through a loopback
// implementation of the Lambda Runtime API, the same HTTP protocol the
// Lambda service speaks to aws-lambda-go's runtime loop.
//
// A test builds once, starts a process, and invokes it:
//
//	bin := lambdatest.Build(t, "list")
//	rt := lambdatest.Start(t, bin, []string{"DATABASE_URL=" + url})
//	res, err := rt.Invoke(ctx, event)
//
// Builds are cached per test binary in one temporary directory. Packages
// that use Build remove it from TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		lambdatest.Cleanup()
//		os.Exit(code)
//	}
//
// A package that does not call Cleanup leaves its binaries in a
// lambdatest-* directory under os.TempDir.
//
// ServeInvoke puts Lambda's own Invoke API (POST
// /2015-03-31/functions/{name}/invocations, as the Runtime Interface
// Emulator serves it) in front of running functions, for programs that
// call Lambda through the AWS SDK (AWS_ENDPOINT_URL_LAMBDA):
//
//	srv := lambdatest.ServeInvoke(t, map[string]*lambdatest.Runtime{"stack-Admin-1A2B": rt})
//
// The Runtime API server implements exactly what aws-lambda-go v1.55.1's
// client calls (see runtime.go): GET invocation/next, POST
// invocation/{id}/response (chunked, with the error trailers the client
// declares), POST invocation/{id}/error, plus POST init/error (which
// aws-lambda-go never sends: a Go function that fails its init exits); no
// Extensions API, as no function asks for SIGTERM
// (lambda.WithEnableSIGTERM). The function process does not inherit the
// test's environment: it sees the variables Lambda sets and the ones the
// caller passes, nothing else, so a missing variable is missing as it
// would be in AWS.
package lambdatest
