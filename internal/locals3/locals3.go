// Package locals3 runs a private S3 endpoint, the machine's moto_server,
// on a loopback port: the dev server's (make run-s3) and the tests'
// (testkit/s3test). CreateBucket makes a bucket there as template.yaml's
// ContentBucket is made.
//
// The server runs in a process group of its own, so Stop reaches anything
// it spawns; on Linux the kernel also kills it when the thread that
// started it ends, which Start arranges to happen only when the calling
// process dies, so a crashed dev server or test binary never leaves a
// moto_server behind. moto keeps everything in memory: a new Start begins
// with no bucket and no object.
package locals3

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// Region is the region clients of the server are configured with.
	Region = "us-east-1"
	// AccessKeyID and SecretAccessKey are the dummy credentials moto
	// accepts.
	AccessKeyID     = "test"
	SecretAccessKey = "test"

	// Binary is the program Start runs, found on PATH.
	Binary = "moto_server"

	defaultStartTimeout = 20 * time.Second
)

// ErrNotInstalled is returned by Start when moto_server is not on PATH.
var ErrNotInstalled = errors.New("locals3: moto_server not found on PATH; install it with: pip install 'moto[server]'")

// Options says how the server runs.
type Options struct {
	// StartTimeout bounds how long Start waits for the server to answer
	// (default 20s).
	StartTimeout time.Duration
}

// Server is a running moto_server on 127.0.0.1. Stop it with Stop. It is
// safe for concurrent use.
type Server struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	out    *cappedBuffer
	once   sync.Once
}

// Start starts moto_server on a free loopback port and waits until it
// answers. It returns ErrNotInstalled when there is no moto_server, and an
// error with the server's output when it does not come up.
func Start(opts Options) (*Server, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, ErrNotInstalled
	}
	// The free port can be taken between probing and binding; retry then.
	var errs []error
	for range 3 {
		s, err := start(bin, opts.StartTimeout)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("locals3: %w", errors.Join(errs...))
}

func start(bin string, timeout time.Duration) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	host := "127.0.0.1"
	s := &Server{
		url:    "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
		exited: make(chan struct{}),
		out:    &cappedBuffer{max: 64 << 10},
	}
	s.cmd = exec.Command(bin, "-H", host, "-p", strconv.Itoa(port))
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	s.cmd.SysProcAttr = sysProcAttr()

	// Pdeathsig fires when the thread that started the child exits, not
	// the process; so start and wait on a thread locked for the child's
	// whole life (the goroutine never unlocks, so the thread ends with
	// it, after the child is gone).
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			close(s.exited)
			return
		}
		started <- nil
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if err := s.waitReady(timeout); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s on port %d: %w; output:\n%s", bin, port, err, s.out.String())
	}
	return s, nil
}

// URL is the server's base URL, such as http://127.0.0.1:41233: the
// S3_ENDPOINT of a process that uses it.
func (s *Server) URL() string { return s.url }

// Output is the first 64 KiB the server wrote (its log).
func (s *Server) Output() string { return s.out.String() }

// Client returns an S3 client for the server (see Config), path-style.
func (s *Server) Client() *s3.Client {
	return s3.NewFromConfig(s.Config(), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.url)
		o.UsePathStyle = true
	})
}

// Config is an AWS configuration for the server: Region and the dummy
// credentials, nothing read from the environment or shared files. The
// endpoint is not in it: set it where the client is made.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
	}
}

// Stop asks the process group to end, kills it if it has not within
// five seconds, and waits for the process. Later calls do nothing.
func (s *Server) Stop() {
	s.once.Do(func() {
		signalGroup(s.cmd.Process, false)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			signalGroup(s.cmd.Process, true)
			<-s.exited
		}
		// Children left in the group (none expected) go too.
		signalGroup(s.cmd.Process, true)
	})
}

// Pause stops the server's process group with SIGSTOP, as a hung endpoint
// would: connections are accepted by the kernel, nothing answers. Resume
// continues it. Fault tests use them.
func (s *Server) Pause() error { return pauseGroup(s.cmd.Process, true) }

// Resume continues a server stopped by Pause.
func (s *Server) Resume() error { return pauseGroup(s.cmd.Process, false) }

// waitReady polls the server until it answers any HTTP request, it exits,
// or timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(s.url + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering (%v)", s.cmd.ProcessState)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %w", timeout, err)
		}
	}
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
