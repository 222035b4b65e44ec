package lambdatest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// InvokePath is the path of Lambda's Invoke API (and of the Runtime
// Interface Emulator's), {name} a function's name or ARN.
const InvokePath = "/2015-03-31/functions/{name}/invocations"

// InvokeServer serves Lambda's Invoke API on a loopback port, in front of
// running functions, as the Runtime Interface Emulator serves it in front
// of one: POST /2015-03-31/functions/{name}/invocations hands the body to
// the function's Runtime as its event, and answers as Lambda answers a
// synchronous (RequestResponse) invocation:
//
//   - 200 with the function's answer as the body, and
//     X-Amz-Executed-Version: $LATEST;
//   - 200 with X-Amz-Function-Error: Unhandled and the function's error
//     document ({"errorMessage","errorType"}) when it reported a failure,
//     or Runtime.ExitError when its process exited instead of answering;
//   - 404 ResourceNotFoundException for a name it does not serve, 400
//     InvalidParameterValueException for another X-Amz-Invocation-Type,
//     400 InvalidRequestContentException for a body that is not JSON, 413 RequestTooLargeException for an event over MaxEventBytes, and
//     403 for a request not signed with Signature Version 4 for the
//     service "lambda"; these errors are JSON with X-Amzn-ErrorType, as
//     Lambda's.
//
// The signature itself is not checked (no emulator can know the key).
// Point an AWS SDK at it with AWS_ENDPOINT_URL_LAMBDA=URL (or the client's
// BaseEndpoint), with any credentials.
type InvokeServer struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL string
	// Timeout bounds each invocation, as a function's Timeout does
	// (default DefaultTimeout).
	Timeout time.Duration

	fns     map[string]*Runtime
	invokes atomic.Int64
}

// ServeInvoke starts an InvokeServer for fns, each Runtime under the
// function name a caller uses (an ARN ending in :function:NAME reaches it
// too). The server closes at the end of the test.
func ServeInvoke(tb testing.TB, fns map[string]*Runtime) *InvokeServer {
	tb.Helper()
	s := &InvokeServer{fns: fns, Timeout: DefaultTimeout}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+InvokePath, s.handleInvoke)
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeAWSError(w, http.StatusNotFound, "UnknownOperationException", "no such operation: "+req.Method+" "+req.URL.Path)
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Invocations is how many events the server has handed to a function.
func (s *InvokeServer) Invocations() int { return int(s.invokes.Load()) }

func (s *InvokeServer) handleInvoke(w http.ResponseWriter, req *http.Request) {
	if !signedFor(req, "lambda") {
		writeAWSError(w, http.StatusForbidden, "IncompleteSignatureException",
			"the request is not signed with Signature Version 4 for the service lambda")
		return
	}
	name := req.PathValue("name")
	if i := strings.LastIndex(name, ":function:"); i >= 0 {
		name = name[i+len(":function:"):]
	}
	rt := s.fns[name]
	if rt == nil {
		writeAWSError(w, http.StatusNotFound, "ResourceNotFoundException",
			"Function not found: arn:aws:lambda:"+DefaultRegion+":"+DefaultAccountID+":function:"+name)
		return
	}
	if t := req.Header.Get("X-Amz-Invocation-Type"); t != "" && t != "RequestResponse" {
		writeAWSError(w, http.StatusBadRequest, "InvalidParameterValueException",
			"this server answers only RequestResponse invocations, not "+t)
		return
	}
	event, err := io.ReadAll(io.LimitReader(req.Body, MaxEventBytes+1))
	if err != nil {
		writeAWSError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	if len(event) > MaxEventBytes {
		writeAWSError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException",
			"Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	if !json.Valid(event) {
		writeAWSError(w, http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json")
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.Timeout)
	defer cancel()
	s.invokes.Add(1)
	res, err := rt.Invoke(ctx, event)
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if res.RequestID != "" {
		w.Header().Set("X-Amzn-RequestId", res.RequestID)
	}
	switch {
	case err != nil:
		typ := "Runtime.ExitError"
		if errors.Is(err, context.DeadlineExceeded) {
			typ = "Sandbox.Timedout"
		}
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(FunctionError{Type: typ, Message: err.Error()})
	case res.Err != nil:
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res.Err)
	default:
		ct := res.ContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.Write(res.Payload)
	}
}

// signedFor reports whether req carries a Signature Version 4
// Authorization header whose credential scope names service.
func signedFor(req *http.Request, service string) bool {
	auth := req.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return false
	}
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return false
	}
	cred, _, _ = strings.Cut(cred, ",")
	// AKID/date/region/service/aws4_request
	parts := strings.Split(cred, "/")
	return len(parts) == 5 && parts[3] == service && parts[4] == "aws4_request"
}

// writeAWSError answers an AWS REST-JSON error, as Lambda's API does.
func writeAWSError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}
