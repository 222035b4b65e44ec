package lambdatest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Limits Lambda applies to a synchronous invocation. A larger event is
// refused by Invoke; a larger response is answered 413 to the runtime, as
// Lambda does (aws-lambda-go then exits), and fails the invocation with
// Function.ResponseSizeTooLarge.
const (
	MaxEventBytes    = 6291456
	MaxResponseBytes = 6291556
	// MaxStreamedBytes bounds a streamed response (Lambda's soft limit is
	// 200 MB); the harness holds what it receives, so it stops there.
	MaxStreamedBytes = 200 << 20
)

// StreamedContentType is the Content-Type under which aws-lambda-go posts
// an events.APIGatewayProxyStreamingResponse: a JSON prelude (status,
// headers, cookies), eight NUL bytes, then the body, sent as it is read.
// Lambda streams such an answer to API Gateway without the 6 MB limit of
// a buffered one.
const StreamedContentType = "application/vnd.awslambda.http-integration-response"

// DefaultTimeout bounds Invoke and WaitInit when their context has no
// deadline of its own.
const DefaultTimeout = 60 * time.Second

const (
	outputMax  = 1 << 20
	outputTail = 4 << 10
)

// Header names of the Runtime API, as aws-lambda-go v1.55.1 reads and
// writes them (lambda/runtime_api_client.go).
const (
	headerRequestID      = "Lambda-Runtime-Aws-Request-Id"
	headerDeadlineMS     = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN    = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID        = "Lambda-Runtime-Trace-Id"
	headerErrorType      = "Lambda-Runtime-Function-Error-Type"
	headerXRayErrorCause = "Lambda-Runtime-Function-Xray-Error-Cause"
	trailerErrorType     = "Lambda-Runtime-Function-Error-Type"
	trailerErrorBody     = "Lambda-Runtime-Function-Error-Body"
)

// FunctionError is the error a function reports, in the JSON shape of the
// Runtime API (aws-lambda-go's messages.InvokeResponse_Error).
type FunctionError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
	// StackTrace is present when the function panicked.
	StackTrace json.RawMessage `json:"stackTrace,omitempty"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Result is the outcome of one invocation that the function answered.
type Result struct {
	RequestID string
	// Payload is the body the function posted: its response, or the raw
	// error document when Err is set.
	Payload []byte
	// ContentType is the Content-Type the function posted with
	// (aws-lambda-go: application/json for a value its handler returned,
	// and for an error; application/octet-stream for an io.Reader that
	// has no ContentType method).
	ContentType string
	// Streamed is set when the function streamed an HTTP integration
	// response (StreamedContentType); SplitStreamed splits Payload.
	Streamed bool
	// Err is set when the function reported a failure (invocation/error),
	// failed mid-response (the error trailers), or answered too much.
	Err *FunctionError
	// Duration runs from handing the event to the function (its
	// invocation/next returning) to its answer arriving.
	Duration time.Duration
}

// InitError says that a function failed before asking for its first event:
// it posted init/error, or it exited.
type InitError struct {
	// Posted is what the function posted to init/error; nil when it just
	// exited (the case of every aws-lambda-go function).
	Posted *FunctionError
	// ExitCode is the process's exit status; -1 when it was killed by a
	// signal (after init/error, the harness kills it, as Lambda does).
	ExitCode int
	// Output is the tail of what the process wrote to stdout and stderr.
	Output string
}

func (e *InitError) Error() string {
	if e.Posted != nil {
		return fmt.Sprintf("function init failed: %v; output tail:\n%s", e.Posted, e.Output)
	}
	return fmt.Sprintf("function exited with status %d before asking for an event; output tail:\n%s", e.ExitCode, e.Output)
}

// Runtime is one function process and the Runtime API server it talks to,
// on a loopback port. Start it with Start; it stops at the end of the test.
// Its methods are safe for concurrent use; invocations are handed to the
// function in the order Invoke was called.
type Runtime struct {
	tb      testing.TB
	name    string
	arn     string
	addr    string
	srv     *http.Server
	cmd     *exec.Cmd
	out     *output
	started time.Time

	mu          sync.Mutex
	queue       []*invocation
	wake        chan struct{} // closed and replaced when queue grows
	inflight    map[string]*invocation
	firstNext   time.Time
	firstAnswer time.Time
	initErr     *FunctionError
	violations  []string
	exitCode    int

	initOK     chan struct{} // closed on the first invocation/next
	initFailed chan struct{} // closed on init/error
	exited     chan struct{} // closed once the process is reaped
	stopping   chan struct{} // closed by Stop
	stopOnce   sync.Once
}

type invocation struct {
	id       string
	event    []byte
	deadline time.Time
	traceID  string
	sentAt   time.Time
	canceled bool
	done     chan struct{}
	result   Result
}

// Start runs the function binary under a new Runtime API server on
// 127.0.0.1 and returns at once, without waiting for its init (see
// WaitInit). The process's environment is Lambda's (AWS_LAMBDA_RUNTIME_API,
// AWS_LAMBDA_FUNCTION_NAME = the binary's directory name,
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_LAMBDA_FUNCTION_VERSION, AWS_REGION,
// _HANDLER=bootstrap, LAMBDA_TASK_ROOT = the binary's directory, which is
// also its working directory, AWS_LAMBDA_LOG_FORMAT=JSON, ...) followed by
// env: "NAME=value" sets a variable, a bare "NAME" removes one. The test's
// own environment is not passed on.
//
// The process and its process group are killed, and the server closed, in
// tb.Cleanup (or by Stop); if the test failed, the tail of the process's
// output is logged then. A Runtime API call the harness does not expect
// fails the test at cleanup.
func Start(tb testing.TB, binary string, env []string) *Runtime {
	tb.Helper()
	binary, err := filepath.Abs(binary)
	if err != nil {
		tb.Fatalf("lambdatest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("lambdatest: listen: %v", err)
	}
	taskRoot := filepath.Dir(binary)
	r := &Runtime{
		tb:         tb,
		addr:       ln.Addr().String(),
		out:        &output{max: outputMax},
		wake:       make(chan struct{}),
		inflight:   make(map[string]*invocation),
		exitCode:   -1,
		initOK:     make(chan struct{}),
		initFailed: make(chan struct{}),
		exited:     make(chan struct{}),
		stopping:   make(chan struct{}),
	}
	procEnv := lambdaEnv(filepath.Base(taskRoot), taskRoot, r.addr, env)
	r.name = lookupEnv(procEnv, "AWS_LAMBDA_FUNCTION_NAME")
	r.arn = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", lookupEnv(procEnv, "AWS_REGION"), DefaultAccountID, r.name)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", r.handleNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", r.handleResponse)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", r.handleInvokeError)
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", r.handleInitError)
	mux.HandleFunc("/", r.handleUnknown)
	// No read or write timeout: invocation/next is a long poll, and
	// everything ends when the test stops the Runtime.
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)

	cmd := exec.Command(binary)
	cmd.Dir = taskRoot
	cmd.Env = procEnv
	cmd.Stdout = r.out
	cmd.Stderr = r.out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 2 * time.Second
	r.cmd = cmd
	r.started = time.Now()
	if err := cmd.Start(); err != nil {
		r.srv.Close()
		tb.Fatalf("lambdatest: start %s: %v", binary, err)
	}
	go r.reap()

	tb.Cleanup(func() {
		r.Stop()
		if tb.Failed() {
			tb.Logf("lambdatest: output of function %s (tail):\n%s", r.name, r.out.tail(outputTail))
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, v := range r.violations {
			tb.Errorf("lambdatest: function %s broke the Runtime API protocol: %s", r.name, v)
		}
	})
	return r
}

func (r *Runtime) reap() {
	r.cmd.Wait()
	r.mu.Lock()
	r.exitCode = r.cmd.ProcessState.ExitCode()
	r.mu.Unlock()
	close(r.exited)
}

// Addr returns the Runtime API's host:port, as AWS_LAMBDA_RUNTIME_API holds it.
func (r *Runtime) Addr() string { return r.addr }

// Pid is the function process's ID, for measurements such as its peak
// resident memory (/proc/<pid>/status).
func (r *Runtime) Pid() int { return r.cmd.Process.Pid }

// Logs returns what the process has written to stdout and stderr (the last
// MiB), interleaved as written.
func (r *Runtime) Logs() string { return r.out.String() }

// InitDuration returns the time from starting the process to its first
// invocation/next call (Lambda's "Init Duration"), or 0 before that.
func (r *Runtime) InitDuration() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstNext.IsZero() {
		return 0
	}
	return r.firstNext.Sub(r.started)
}

// FirstResponseLatency returns the time from starting the process to the
// first answer (response or error) it posted for an event, or 0 before
// that. Invoke right after Start and this is the cold-start latency a
// client sees, less the network.
func (r *Runtime) FirstResponseLatency() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstAnswer.IsZero() {
		return 0
	}
	return r.firstAnswer.Sub(r.started)
}

// WaitInit waits until the function asks for its first event, and returns
// nil then. It returns an *InitError if the function instead posts
// init/error or exits, and an error wrapping the context's error if ctx
// ends first (after DefaultTimeout when ctx has no deadline).
func (r *Runtime) WaitInit(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	select {
	case <-r.initOK:
		return nil
	case <-r.exited:
		select {
		case <-r.initOK:
			return nil
		default:
		}
		return r.initError()
	case <-r.initFailed:
		// The harness kills the process after init/error; wait for its
		// output to be complete.
		select {
		case <-r.exited:
		case <-ctx.Done():
		}
		return r.initError()
	case <-ctx.Done():
		return fmt.Errorf("lambdatest: function %s did not finish init: %w; output tail:\n%s",
			r.name, context.Cause(ctx), r.out.tail(outputTail))
	}
}

func (r *Runtime) initError() *InitError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &InitError{Posted: r.initErr, ExitCode: r.exitCode, Output: r.out.tail(outputTail)}
}

// Invoke hands event to the function, as a synchronous invocation, and
// waits for its answer. The event's deadline (Lambda-Runtime-Deadline-Ms,
// the handler's ctx deadline) is ctx's deadline, DefaultTimeout when ctx
// has none.
//
// A function that reports a failure is not an Invoke error: the Result
// carries it in Err. Invoke returns an error when the event is larger than
// MaxEventBytes, when the process has exited or exits before answering, or
// when ctx ends first; the error includes the tail of the process's output.
func (r *Runtime) Invoke(ctx context.Context, event []byte) (Result, error) {
	if len(event) > MaxEventBytes {
		return Result{}, fmt.Errorf("lambdatest: event of %d bytes is over Lambda's %d-byte limit", len(event), MaxEventBytes)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	deadline, _ := ctx.Deadline()
	inv := &invocation{
		id:       newRequestID(),
		event:    bytes.Clone(event),
		deadline: deadline,
		traceID:  newTraceID(),
		done:     make(chan struct{}),
	}
	if inv.event == nil {
		inv.event = []byte{}
	}

	r.mu.Lock()
	select {
	case <-r.exited:
		r.mu.Unlock()
		return Result{}, r.exitedError("before invocation " + inv.id)
	default:
	}
	if r.initErr != nil {
		err := r.initErr
		r.mu.Unlock()
		return Result{}, fmt.Errorf("lambdatest: function %s failed its init: %w", r.name, err)
	}
	r.queue = append(r.queue, inv)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()

	select {
	case <-inv.done:
		return inv.result, nil
	case <-r.exited:
		select {
		case <-inv.done:
			return inv.result, nil
		default:
		}
		return Result{RequestID: inv.id}, r.exitedError("before answering invocation " + inv.id)
	case <-ctx.Done():
		r.mu.Lock()
		inv.canceled = true
		r.mu.Unlock()
		select {
		case <-inv.done:
			return inv.result, nil
		default:
		}
		return Result{RequestID: inv.id}, fmt.Errorf("lambdatest: invocation %s of function %s: %w; output tail:\n%s",
			inv.id, r.name, context.Cause(ctx), r.out.tail(outputTail))
	}
}

func (r *Runtime) exitedError(when string) error {
	r.mu.Lock()
	code := r.exitCode
	r.mu.Unlock()
	return fmt.Errorf("lambdatest: function %s exited with status %d %s; output tail:\n%s",
		r.name, code, when, r.out.tail(outputTail))
}

// Stop kills the function's process group and closes the server. It is
// idempotent and called at cleanup. (No function asks for SIGTERM, which
// Lambda sends only to a function that registered an extension, so the
// harness neither sends it nor serves the Extensions API.)
func (r *Runtime) Stop() {
	r.stopOnce.Do(func() {
		close(r.stopping)
		pid := r.cmd.Process.Pid
		signalGroup(pid, syscall.SIGKILL)
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			r.tb.Errorf("lambdatest: function %s (pid %d) did not exit after SIGKILL", r.name, pid)
		}
		r.srv.Close()
	})
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

func (r *Runtime) violation(format string, args ...any) {
	r.mu.Lock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// handleNext is GET /runtime/invocation/next: a long poll that answers with
// the next queued event. aws-lambda-go requires 200 and reads the request
// ID, deadline (epoch ms, required), function ARN and trace ID headers, plus
// the optional Cognito identity, client context and tenant ID ones.
func (r *Runtime) handleNext(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.firstNext.IsZero() {
		r.firstNext = time.Now()
		close(r.initOK)
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		for len(r.queue) > 0 {
			inv := r.queue[0]
			r.queue = r.queue[1:]
			if inv.canceled {
				continue
			}
			inv.sentAt = time.Now()
			r.inflight[inv.id] = inv
			r.mu.Unlock()
			h := w.Header()
			h.Set(headerRequestID, inv.id)
			h.Set(headerDeadlineMS, strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			h.Set(headerFunctionARN, r.arn)
			h.Set(headerTraceID, inv.traceID)
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write(inv.event)
			return
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-req.Context().Done():
			return
		case <-r.stopping:
			writeError(w, http.StatusInternalServerError, "Runtime.Shutdown", "the runtime is shutting down")
			return
		}
	}
}

// handleResponse is POST /runtime/invocation/{id}/response. aws-lambda-go
// sends the body chunked and declares two trailers that it fills in only
// when reading the handler's response fails midway: the error type, and the
// error document base64-encoded. It requires 202.
func (r *Runtime) handleResponse(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	streamed := req.Header.Get("Content-Type") == StreamedContentType ||
		strings.EqualFold(req.Header.Get("Lambda-Runtime-Function-Response-Mode"), "streaming")
	limit := int64(MaxResponseBytes)
	if streamed {
		limit = MaxStreamedBytes
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		r.violation("POST %s: reading the body: %v", req.URL.Path, err)
		writeError(w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	size := int64(len(body))
	rest, _ := io.Copy(io.Discard, req.Body) // to the end, where the trailers are
	size += rest

	res := Result{RequestID: id, Payload: body, ContentType: req.Header.Get("Content-Type"), Streamed: streamed}
	status := http.StatusAccepted
	switch {
	case req.Trailer.Get(trailerErrorType) != "":
		res.Err = &FunctionError{Type: req.Trailer.Get(trailerErrorType)}
		if doc, err := base64.StdEncoding.DecodeString(req.Trailer.Get(trailerErrorBody)); err == nil {
			json.Unmarshal(doc, res.Err)
			res.Payload = doc
		}
	case size > limit:
		res.Payload = nil
		res.Err = &FunctionError{
			Type:    "Function.ResponseSizeTooLarge",
			Message: fmt.Sprintf("Response payload size (%d bytes) exceeded maximum allowed payload size (%d bytes).", size, limit),
		}
		status = http.StatusRequestEntityTooLarge
	}
	if !r.answer(id, res) {
		r.violation("POST %s: no invocation %q is waiting for an answer", req.URL.Path, id)
		writeError(w, http.StatusBadRequest, "InvalidRequestID", "unknown or already answered request ID")
		return
	}
	if status != http.StatusAccepted {
		writeError(w, status, "RequestEntityTooLarge", res.Err.Message)
		return
	}
	writeAccepted(w)
}

// SplitStreamed splits a streamed HTTP integration response into its JSON
// prelude and its body, at the eight NUL bytes that end the prelude.
func SplitStreamed(payload []byte) (prelude, body []byte, err error) {
	var sep [8]byte
	i := bytes.Index(payload, sep[:])
	if i < 0 {
		return nil, nil, fmt.Errorf("lambdatest: no 8-NUL separator after the prelude in %d bytes", len(payload))
	}
	if !json.Valid(payload[:i]) {
		return nil, nil, fmt.Errorf("lambdatest: prelude %q is not JSON", payload[:i])
	}
	return payload[:i], payload[i+8:], nil
}

// handleInvokeError is POST /runtime/invocation/{id}/error. aws-lambda-go
// posts {"errorMessage","errorType"[,"stackTrace"]} as application/json,
// with an X-Ray cause header, and requires 202. After a panic it then
// exits.
func (r *Runtime) handleInvokeError(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	fe, body, ok := readFunctionError(w, req)
	if !ok {
		r.violation("POST %s: unreadable error document %q", req.URL.Path, body)
	}
	if cause := req.Header.Get(headerXRayErrorCause); cause != "" && !json.Valid([]byte(cause)) {
		r.violation("POST %s: %s is not JSON: %q", req.URL.Path, headerXRayErrorCause, cause)
	}
	res := Result{RequestID: id, Payload: body, ContentType: req.Header.Get("Content-Type"), Err: fe}
	if !r.answer(id, res) {
		r.violation("POST %s: no invocation %q is waiting for an answer", req.URL.Path, id)
		writeError(w, http.StatusBadRequest, "InvalidRequestID", "unknown or already answered request ID")
		return
	}
	writeAccepted(w)
}

// handleInitError is POST /runtime/init/error. aws-lambda-go never calls
// it; other runtimes do, and Lambda then ends the process.
func (r *Runtime) handleInitError(w http.ResponseWriter, req *http.Request) {
	fe, body, ok := readFunctionError(w, req)
	if !ok {
		r.violation("POST %s: unreadable error document %q", req.URL.Path, body)
	}
	r.mu.Lock()
	first := r.initErr == nil
	if first {
		r.initErr = fe
	}
	r.mu.Unlock()
	writeAccepted(w)
	if first {
		close(r.initFailed)
		go func() {
			time.Sleep(100 * time.Millisecond) // let the 202 reach it
			signalGroup(r.cmd.Process.Pid, syscall.SIGKILL)
		}()
	}
}

func (r *Runtime) handleUnknown(w http.ResponseWriter, req *http.Request) {
	r.violation("%s %s: not a Runtime API call", req.Method, req.URL.Path)
	writeError(w, http.StatusNotFound, "NotFound", "unknown Runtime API path")
}

// answer completes the in-flight invocation id with res. It reports false
// when no invocation id is in flight.
func (r *Runtime) answer(id string, res Result) bool {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	inv := r.inflight[id]
	if inv == nil {
		return false
	}
	delete(r.inflight, id)
	if r.firstAnswer.IsZero() {
		r.firstAnswer = now
	}
	res.Duration = now.Sub(inv.sentAt)
	inv.result = res
	close(inv.done)
	return true
}

// readFunctionError reads an error document; the error type falls back to
// the Lambda-Runtime-Function-Error-Type header that some runtimes send. ok
// is false when the body is not such a document.
func readFunctionError(w http.ResponseWriter, req *http.Request) (fe *FunctionError, body []byte, ok bool) {
	body, _ = io.ReadAll(io.LimitReader(req.Body, MaxResponseBytes))
	fe = &FunctionError{}
	err := json.Unmarshal(body, fe)
	ok = err == nil
	if !ok {
		fe.Message = string(body)
	}
	if fe.Type == "" {
		fe.Type = req.Header.Get(headerErrorType)
	}
	if fe.Type == "" && fe.Message == "" {
		ok = false
	}
	return fe, body, ok
}

func writeAccepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, `{"status":"OK"}`+"\n")
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(FunctionError{Type: typ, Message: msg})
}

var _ error = (*FunctionError)(nil)
var _ error = (*InitError)(nil)
