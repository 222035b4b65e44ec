// Package s3test gives tests a real S3 protocol endpoint: one moto_server
// per test binary on a loopback port, or the endpoint named by
// S3TEST_ENDPOINT, and fresh buckets on it.
//
// A test package that uses it has testkit.Main as its TestMain, which
// stops the server (its whole process group, Stop) when the tests end. On
// Linux the server also gets SIGKILL when the test process dies by any
// means, so no moto_server outlives `go test` even without it.
package s3test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

const (
	// EnvEndpoint names the variable that, when set, points the tests at
	// an already running S3 endpoint (such as http://127.0.0.1:5000)
	// instead of starting moto_server.
	EnvEndpoint = "S3TEST_ENDPOINT"
	// Region is the region clients and child processes are configured
	// with.
	Region = "us-east-1"
	// AccessKeyID and SecretAccessKey are the dummy credentials moto
	// accepts.
	AccessKeyID     = "test"
	SecretAccessKey = "test"

	startTimeout = 20 * time.Second
	motoBinary   = "moto_server"
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
	proc *motoProc // nil when not started or already stopped
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
		p.stop()
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
	return pauseGroup(p.cmd.Process, stop)
}

func start() {
	if u := os.Getenv(EnvEndpoint); u != "" {
		server.ep = Endpoint{URL: u}
		return
	}
	bin, err := exec.LookPath(motoBinary)
	if err != nil {
		server.skip = "moto_server not found on PATH; install with pip install 'moto[server]'"
		return
	}
	// The free port can be taken between probing and binding; retry then.
	var errs []error
	for range 3 {
		p, err := startMoto(bin)
		if err == nil {
			server.mu.Lock()
			server.proc = p
			server.mu.Unlock()
			server.ep = Endpoint{URL: p.url}
			return
		}
		errs = append(errs, err)
	}
	server.err = errors.Join(errs...)
}

// motoProc is a running moto_server.
type motoProc struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	out    *cappedBuffer
}

func startMoto(bin string) (*motoProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	host := "127.0.0.1"
	p := &motoProc{
		url:    "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
		exited: make(chan struct{}),
		out:    &cappedBuffer{max: 64 << 10},
	}
	p.cmd = exec.Command(bin, "-H", host, "-p", strconv.Itoa(port))
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = sysProcAttr()

	// Pdeathsig fires when the thread that started the child exits, not
	// the process; so start and wait on a thread locked for the child's
	// whole life (the goroutine never unlocks, so the thread ends with
	// it, after the child is gone).
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.exited)
			return
		}
		started <- nil
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}

	if err := p.waitReady(startTimeout); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s on port %d: %w; output:\n%s", bin, port, err, p.out.String())
	}
	return p, nil
}

// waitReady polls the server until it answers any HTTP request, it exits,
// or timeout passes.
func (p *motoProc) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(p.url + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before answering (%v)", p.cmd.ProcessState)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %w", timeout, err)
		}
	}
}

// stop asks the process group to end, then kills it if it has not within
// five seconds, and waits for the process.
func (p *motoProc) stop() {
	signalGroup(p.cmd.Process, false)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		signalGroup(p.cmd.Process, true)
		<-p.exited
	}
	// Children left in the group (none expected) go too.
	signalGroup(p.cmd.Process, true)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cappedBuffer keeps the first max bytes written to it; it is safe for
// concurrent use.
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
