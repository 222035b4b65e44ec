package lambdatest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestInvoke(t *testing.T) {
	bin := lambdatest.Build(t, lambdatest.Hello)
	rt := lambdatest.Start(t, bin, nil)

	seen := make(map[string]bool)
	for i, event := range []string{`{"n":1}`, `"a string"`, `[1,2,3]`, `{"n":4,"nested":{"x":null}}`, `0`} {
		res, err := rt.Invoke(ctx(t), []byte(event))
		if err != nil {
			t.Fatalf("invoke %d: %v", i, err)
		}
		if res.Err != nil {
			t.Fatalf("invoke %d: function error %v", i, res.Err)
		}
		if got := string(res.Payload); got != event {
			t.Errorf("invoke %d: got %s, want %s", i, got, event)
		}
		if res.ContentType != "application/json" {
			t.Errorf("invoke %d: got Content-Type %q, want application/json", i, res.ContentType)
		}
		if res.RequestID == "" || seen[res.RequestID] {
			t.Errorf("invoke %d: request ID %q empty or reused", i, res.RequestID)
		}
		seen[res.RequestID] = true
		if res.Duration <= 0 {
			t.Errorf("invoke %d: got duration %v, want > 0", i, res.Duration)
		}
	}

	initDur, first := rt.InitDuration(), rt.FirstResponseLatency()
	if initDur <= 0 || first < initDur {
		t.Errorf("got init %v, first response %v; want 0 < init <= first response", initDur, first)
	}
	if fi, err := os.Stat(bin); err == nil {
		t.Logf("hello bootstrap: %d bytes; init %v; first response %v", fi.Size(), initDur, first)
	}
}

func TestInvokeFunctionError(t *testing.T) {
	rt := lambdatest.Start(t, lambdatest.Build(t, lambdatest.Hello), nil)

	res, err := rt.Invoke(ctx(t), []byte(`{"fail":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil {
		t.Fatalf("got payload %s, want a function error", res.Payload)
	}
	if res.Err.Type != "errorString" || res.Err.Message != "hello: asked to fail" {
		t.Errorf("got %+v, want errorString: hello: asked to fail", res.Err)
	}
	if res.ContentType != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", res.ContentType)
	}

	// The process survives a returned error and serves the next event.
	res, err = rt.Invoke(ctx(t), []byte(`{"ok":1}`))
	if err != nil || res.Err != nil || string(res.Payload) != `{"ok":1}` {
		t.Fatalf("after an error: got %s, %v, %v; want the echo", res.Payload, res.Err, err)
	}
}

func TestInvokeProcessExits(t *testing.T) {
	rt := lambdatest.Start(t, lambdatest.Build(t, lambdatest.Hello), nil)

	_, err := rt.Invoke(ctx(t), []byte(`{"exit":true}`))
	if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Fatalf("got %v, want an error saying the process exited with status 3", err)
	}
	if _, err := rt.Invoke(ctx(t), []byte(`{}`)); err == nil {
		t.Fatal("invoke after exit: got no error")
	}
}

func TestInitFailure(t *testing.T) {
	bin := lambdatest.Build(t, lambdatest.Hello)

	t.Run("MissingVariable", func(t *testing.T) {
		rt := lambdatest.Start(t, bin, []string{"HELLO_REQUIRE=1"})
		err := rt.WaitInit(ctx(t))
		var ie *lambdatest.InitError
		if !errors.As(err, &ie) {
			t.Fatalf("got %v, want an *InitError", err)
		}
		if ie.ExitCode != 1 || ie.Posted != nil {
			t.Errorf("got exit %d, posted %v; want exit 1, nothing posted", ie.ExitCode, ie.Posted)
		}
		if !strings.Contains(ie.Output, "HELLO_REQUIRED") {
			t.Errorf("got output %q, want it to name HELLO_REQUIRED", ie.Output)
		}
		if _, err := rt.Invoke(ctx(t), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "HELLO_REQUIRED") {
			t.Errorf("invoke: got %v, want an error naming HELLO_REQUIRED", err)
		}
	})
	t.Run("VariableSet", func(t *testing.T) {
		rt := lambdatest.Start(t, bin, []string{"HELLO_REQUIRE=1", "HELLO_REQUIRED=yes"})
		if err := rt.WaitInit(ctx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestInvokeTooLarge(t *testing.T) {
	rt := lambdatest.Start(t, lambdatest.Build(t, lambdatest.Hello), nil)
	if _, err := rt.Invoke(ctx(t), make([]byte, lambdatest.MaxEventBytes+1)); err == nil {
		t.Fatal("got no error for an event over the limit")
	}
}

// script writes an executable shell script named bootstrap into a directory
// named fn and returns its path.
func script(t *testing.T, fn, body string) string {
	dir := filepath.Join(t.TempDir(), fn)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bootstrap")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEnvironment(t *testing.T) {
	t.Setenv("LAMBDATEST_LEAK", "1")
	rt := lambdatest.Start(t, script(t, "envfn", "env; exec sleep 60"), []string{"EXTRA=x", "AWS_REGION=eu-west-1", "TZ"})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rt.Logs(), "EXTRA=") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	logs := rt.Logs()
	for _, want := range []string{
		"AWS_LAMBDA_RUNTIME_API=" + rt.Addr(), "AWS_LAMBDA_FUNCTION_NAME=envfn", "_HANDLER=bootstrap",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "LAMBDA_TASK_ROOT=",
		"AWS_REGION=eu-west-1", "EXTRA=x",
	} {
		if !strings.Contains(logs, want+"\n") && !strings.Contains(logs, want) {
			t.Errorf("environment lacks %s:\n%s", want, logs)
		}
	}
	for _, not := range []string{"LAMBDATEST_LEAK", "TZ="} {
		if strings.Contains(logs, not) {
			t.Errorf("environment has %s:\n%s", not, logs)
		}
	}
	if !strings.HasPrefix(rt.Addr(), "127.0.0.1:") {
		t.Errorf("got address %s, want loopback", rt.Addr())
	}
}

func TestInvokeDeadline(t *testing.T) {
	rt := lambdatest.Start(t, script(t, "silent", "exec sleep 60"), nil)
	c, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := rt.Invoke(c, []byte(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if err := rt.WaitInit(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitInit: got %v, want context.DeadlineExceeded", err)
	}
}

// TestProtocol plays the function's side of the Runtime API by hand, for
// the cases hello cannot produce.
func TestProtocol(t *testing.T) {
	rt := lambdatest.Start(t, script(t, "manual", "exec sleep 60"), nil)
	base := "http://" + rt.Addr() + "/2018-06-01/runtime/"

	// next fetches one event and checks its headers.
	next := func() string {
		t.Helper()
		resp, err := http.Get(base + "invocation/next")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("next: got %d, want 200", resp.StatusCode)
		}
		ms, err := strconv.ParseInt(resp.Header.Get("Lambda-Runtime-Deadline-Ms"), 10, 64)
		if err != nil || time.UnixMilli(ms).Before(time.Now()) {
			t.Errorf("got deadline %q, want a future epoch in ms", resp.Header.Get("Lambda-Runtime-Deadline-Ms"))
		}
		if arn := resp.Header.Get("Lambda-Runtime-Invoked-Function-Arn"); arn != "arn:aws:lambda:us-east-1:123456789012:function:manual" {
			t.Errorf("got ARN %q", arn)
		}
		if tr := resp.Header.Get("Lambda-Runtime-Trace-Id"); !strings.HasPrefix(tr, "Root=1-") {
			t.Errorf("got trace ID %q", tr)
		}
		return resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	}
	type outcome struct {
		res lambdatest.Result
		err error
	}
	invoke := func() chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			res, err := rt.Invoke(ctx(t), []byte(`{}`))
			ch <- outcome{res, err}
		}()
		return ch
	}

	t.Run("ErrorTrailers", func(t *testing.T) {
		ch := invoke()
		id := next()
		doc := `{"errorMessage":"read failed","errorType":"myError"}`
		req, _ := http.NewRequest("POST", base+"invocation/"+id+"/response", io.MultiReader(strings.NewReader("partial")))
		req.Trailer = http.Header{"Lambda-Runtime-Function-Error-Type": {"myError"},
			"Lambda-Runtime-Function-Error-Body": {base64.StdEncoding.EncodeToString([]byte(doc))}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("got %d, want 202", resp.StatusCode)
		}
		o := <-ch
		if o.err != nil || o.res.Err == nil || o.res.Err.Type != "myError" || o.res.Err.Message != "read failed" {
			t.Errorf("got %+v, %v; want function error myError: read failed", o.res.Err, o.err)
		}
	})
	t.Run("ResponseSizeTooLarge", func(t *testing.T) {
		ch := invoke()
		id := next()
		resp, err := http.Post(base+"invocation/"+id+"/response", "application/octet-stream",
			bytes.NewReader(make([]byte, lambdatest.MaxResponseBytes+1)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("got %d, want 413", resp.StatusCode)
		}
		o := <-ch
		if o.err != nil || o.res.Err == nil || o.res.Err.Type != "Function.ResponseSizeTooLarge" {
			t.Errorf("got %+v, %v; want Function.ResponseSizeTooLarge", o.res.Err, o.err)
		}
	})
	t.Run("BufferedAtLimit", func(t *testing.T) {
		// Exactly 6291556 bytes is still a buffered answer.
		ch := invoke()
		id := next()
		resp, err := http.Post(base+"invocation/"+id+"/response", "application/octet-stream",
			bytes.NewReader(make([]byte, lambdatest.MaxResponseBytes)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := <-ch
		if resp.StatusCode != http.StatusAccepted || o.err != nil || o.res.Err != nil || len(o.res.Payload) != lambdatest.MaxResponseBytes {
			t.Errorf("got %d, %d bytes, %+v, %v; want 202 and the whole payload", resp.StatusCode, len(o.res.Payload), o.res.Err, o.err)
		}
	})
	t.Run("StreamedAboveBufferedLimit", func(t *testing.T) {
		// A streamed HTTP integration response (a JSON prelude, 8 NULs,
		// the body, sent chunked) has no 6 MB cap; marked by its
		// Content-Type (as aws-lambda-go does) or by the response-mode
		// header.
		for _, mark := range []http.Header{
			{"Content-Type": {lambdatest.StreamedContentType}},
			{"Content-Type": {"application/octet-stream"}, "Lambda-Runtime-Function-Response-Mode": {"streaming"}},
		} {
			ch := invoke()
			id := next()
			body := bytes.Repeat([]byte{0xab}, lambdatest.MaxResponseBytes+1<<20)
			payload := io.MultiReader(strings.NewReader(`{"statusCode":200,"headers":{"X":"y"}}`),
				bytes.NewReader(make([]byte, 8)), bytes.NewReader(body))
			req, _ := http.NewRequest("POST", base+"invocation/"+id+"/response", payload) // chunked: no length
			req.Header = mark
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := <-ch
			if resp.StatusCode != http.StatusAccepted || o.err != nil || o.res.Err != nil || !o.res.Streamed {
				t.Fatalf("%v: got %d, %+v, %v, streamed %v; want 202 and a streamed answer", mark, resp.StatusCode, o.res.Err, o.err, o.res.Streamed)
			}
			prelude, got, err := lambdatest.SplitStreamed(o.res.Payload)
			if err != nil || string(prelude) != `{"statusCode":200,"headers":{"X":"y"}}` || !bytes.Equal(got, body) {
				t.Errorf("%v: prelude %q, %d body bytes, %v; want the prelude and the %d bytes", mark, prelude, len(got), err, len(body))
			}
		}
	})
	t.Run("Queued", func(t *testing.T) {
		// Events queued before the function asks are handed out in order.
		chs := []chan outcome{invoke()}
		time.Sleep(20 * time.Millisecond)
		chs = append(chs, invoke())
		for i := range chs {
			id := next()
			resp, err := http.Post(base+"invocation/"+id+"/response", "application/json", strings.NewReader(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		for i, ch := range chs {
			if o := <-ch; o.err != nil || string(o.res.Payload) != fmt.Sprint(i) {
				t.Errorf("invoke %d: got %s, %v", i, o.res.Payload, o.err)
			}
		}
	})
}

// BenchmarkColdStart measures hello's cold start: process start to first
// answered event, the baseline for the real functions' cold starts.
func BenchmarkColdStart(b *testing.B) {
	bin := lambdatest.Build(b, lambdatest.Hello)
	var initTotal, firstTotal time.Duration
	for b.Loop() {
		rt := lambdatest.Start(b, bin, nil)
		if _, err := rt.Invoke(b.Context(), []byte(`{}`)); err != nil {
			b.Fatal(err)
		}
		initTotal += rt.InitDuration()
		firstTotal += rt.FirstResponseLatency()
		rt.Stop()
	}
	b.ReportMetric(float64(initTotal.Microseconds())/float64(b.N), "init-µs/op")
	b.ReportMetric(float64(firstTotal.Microseconds())/float64(b.N), "first-response-µs/op")
}

// BenchmarkWarmInvoke measures one warm round trip through the harness.
func BenchmarkWarmInvoke(b *testing.B) {
	rt := lambdatest.Start(b, lambdatest.Build(b, lambdatest.Hello), nil)
	event := []byte(`{"n":1}`)
	for b.Loop() {
		if _, err := rt.Invoke(b.Context(), event); err != nil {
			b.Fatal(err)
		}
	}
}
