// Package s3test gives tests a real S3 protocol endpoint: one moto_server
// per test binary on a loopback port (package locals3, as make run-s3
// starts one), or the endpoint named by S3TEST_ENDPOINT, and fresh buckets
// on it.
//
// A test package that uses it has testkit.Main as its TestMain, which
// stops the server (its whole process group, Stop) when the tests end. On
// Linux the server also gets SIGKILL when the test process dies by any
// means, so no moto_server outlives `go test` even without it.
package s3test

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/locals3"
)

const (
	// EnvEndpoint names the variable that, when set, points the tests at
	// an already running S3 endpoint (such as http://127.0.0.1:5000)
	// instead of starting moto_server.
	EnvEndpoint = "S3TEST_ENDPOINT"
	// Region is the region clients and child processes are configured
	// with.
	Region = locals3.Region
	// AccessKeyID and SecretAccessKey are the dummy credentials moto
	// accepts.
	AccessKeyID     = locals3.AccessKeyID
	SecretAccessKey = locals3.SecretAccessKey
)

// Endpoint is an S3 endpoint reachable from this process.
type Endpoint struct {
	// URL is the base URL, such as http://127.0.0.1:41233.
	URL string
}

// Env returns the environment a child process needs to reach the
// endpoint with the dummy credentials, as KEY=value entries to append to
// exec.Cmd.Env (later entries win): AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, an empty AWS_SESSION_TOKEN (hiding the parent's),
// AWS_REGION, S3_ENDPOINT, S3_FORCE_PATH_STYLE=true, and
// AWS_EC2_METADATA_DISABLED=true (so the SDK does not probe for instance
// credentials).
func (e Endpoint) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + Region,
		"S3_ENDPOINT=" + e.URL,
		"S3_FORCE_PATH_STYLE=true",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// server is the moto_server of this test binary, started at most once.
var server struct {
	once sync.Once
	ep   Endpoint
	skip string // set when moto_server is absent and the test may skip
	err  error

	mu   sync.Mutex
	proc *locals3.Server // nil when not started or already stopped
}

// MustStart returns the S3 endpoint for this test binary: S3TEST_ENDPOINT
// when set, else a moto_server it starts on a free loopback port the first
// time it is called (later calls share it) and waits up to 20 s for.
//
// When moto_server is not on PATH the test is skipped, or fails when the
// CI variable is set (CI must run these tests). Any other start failure
// fails the test with the server's output.
func MustStart(tb testing.TB) Endpoint {
	tb.Helper()
	server.once.Do(start)
	if server.skip != "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("s3test: %s (CI is set, so this is a failure)", server.skip)
		}
		tb.Skipf("s3test: %s", server.skip)
	}
	if server.err != nil {
		tb.Fatalf("s3test: %v", server.err)
	}
	return server.ep
}

// Stop stops the moto_server this binary started, if any, killing its
// process group and waiting for it. Main calls it; later MustStart calls
// fail rather than start another server.
func Stop() {
	server.once.Do(func() { server.err = errors.New("moto_server already stopped") })
	server.mu.Lock()
	p := server.proc
	server.proc = nil
	server.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// Freeze stops this binary's moto_server with SIGSTOP, as a hung endpoint
// would: connections are accepted by the kernel, nothing answers. Thaw
// resumes it. A fault test that freezes S3 needs a test binary (and so a
// moto_server) of its own; with S3TEST_ENDPOINT set there is nothing to
// freeze, and it fails.
func Freeze() error { return pause(true) }

// Thaw resumes a moto_server stopped by Freeze.
func Thaw() error { return pause(false) }

func pause(stop bool) error {
	server.mu.Lock()
	p := server.proc
	server.mu.Unlock()
	if p == nil {
		return errors.New("s3test: no moto_server of this binary is running")
	}
	if stop {
		return p.Pause()
	}
	return p.Resume()
}

func start() {
	if u := os.Getenv(EnvEndpoint); u != "" {
		server.ep = Endpoint{URL: u}
		return
	}
	p, err := locals3.Start(locals3.Options{})
	switch {
	case errors.Is(err, locals3.ErrNotInstalled):
		server.skip = err.Error()
	case err != nil:
		server.err = err
	default:
		server.mu.Lock()
		server.proc = p
		server.mu.Unlock()
		server.ep = Endpoint{URL: p.URL()}
	}
}
