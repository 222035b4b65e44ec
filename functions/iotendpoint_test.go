package functions_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// discoveredEndpoint is what the IoT stand-in answers.
const discoveredEndpoint = "a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com"

// iotControlPlane stands in for AWS IoT's control plane on a loopback
// port: GET /endpoint?endpointType=iot:Data-ATS, SigV4-signed for service
// iot in us-east-1 by the test's keys (the signature checked), answered as IoT's REST-JSON protocol does: 200 with endpointAddress,
// or, when refuse is set, 403 AccessDeniedException (X-Amzn-ErrorType and
// a JSON message). Anything else is a 400 naming what was wrong. calls
// counts the requests.
func iotControlPlane(t testing.TB, refuse bool) (url string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.Copy(io.Discard, r.Body)
		auth := r.Header.Get("Authorization")
		switch {
		case r.Method != http.MethodGet || r.URL.Path != "/endpoint":
			http.Error(w, "want GET /endpoint, got "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		case r.URL.Query().Get("endpointType") != "iot:Data-ATS":
			http.Error(w, "want endpointType=iot:Data-ATS, got "+r.URL.RawQuery, http.StatusBadRequest)
			return
		case !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") ||
			!strings.Contains(auth, "/us-east-1/iot/aws4_request") || !sigV4Valid(r):
			http.Error(w, "not signed with SigV4 for iot in us-east-1 by AKIDEXAMPLE: "+auth, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if refuse {
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"User: arn:aws:sts::123456789012:assumed-role/pendinguploads-IotendpointRole/x is not authorized to perform: iot:DescribeEndpoint"}`)
			return
		}
		io.WriteString(w, `{"endpointAddress":"`+discoveredEndpoint+`"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

// sigV4Valid signs r again as IoT would check it (its signed headers,
// at its X-Amz-Date, with the test's keys, for iot in us-east-1) and
// compares the signatures.
func sigV4Valid(r *http.Request) bool {
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 "), ", ") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || fields["Signature"] == "" {
		return false
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return false
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" {
			again.Header.Set(h, r.Header.Get(h))
		}
	}
	empty := sha256.Sum256(nil)
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "not-a-real-key"}
	if v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(empty[:]), "iot", "us-east-1", at) != nil {
		return false
	}
	return strings.HasSuffix(again.Header.Get("Authorization"), "Signature="+fields["Signature"])
}

// runIotEndpoint starts iotendpoint with env, invokes it with
// events/iotendpoint.json (ResponseURL a loopback server, RequestType
// requestType) and returns the answer it PUT there, which must arrive
// within migrateAnswerBound of the invocation and echo the request.
func runIotEndpoint(t testing.TB, requestType cfn.RequestType, env ...string) cfn.Response {
	t.Helper()
	url, puts := cfnServer(t)
	var ev map[string]any
	if err := json.Unmarshal(readEvent(t, "iotendpoint"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["ResponseURL"], ev["RequestType"] = url, string(requestType)
	if requestType != cfn.RequestCreate {
		ev["PhysicalResourceId"] = "pendinguploads-iot-data-endpoint"
	}
	event, _ := json.Marshal(ev)
	rt := start(t, "iotendpoint", env...)
	began := time.Now()
	invoke(t, rt, event)
	var put cfnPut
	select {
	case put = <-puts:
	default:
		t.Fatalf("iotendpoint answered without a PUT to the ResponseURL; logs:\n%s", rt.Logs())
	}
	if took := time.Since(began); took > migrateAnswerBound {
		t.Errorf("the answer took %v, want at most %v", took, migrateAnswerBound)
	}
	var resp cfn.Response
	if put.method != http.MethodPut || json.Unmarshal(put.body, &resp) != nil {
		t.Fatalf("answer: got %s %s, want a PUT of a CloudFormation response", put.method, put.body)
	}
	if resp.RequestID != ev["RequestId"] || resp.LogicalResourceID != ev["LogicalResourceId"] ||
		resp.PhysicalResourceID != "pendinguploads-iot-data-endpoint" {
		t.Errorf("answer %s does not echo the request, or changed the physical id", put.body)
	}
	if strings.Contains(string(put.body), "not-a-real-key") {
		t.Errorf("answer %s carries the secret key", put.body)
	}
	return resp
}

// iotEnv is the function's environment with IoT's control plane at url
// (the SDK's override variable, as the template sets it).
func iotEnv(url string) []string {
	return []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY=not-a-real-key", "AWS_ENDPOINT_URL_IOT=" + url}
}

// TestIotEndpoint feeds events/iotendpoint.json to the iotendpoint
// function built as Lambda builds it, with IoT's control plane a loopback
// stand-in: Create and Update answer SUCCESS with the account's data
// endpoint as Data.Address (one signed DescribeEndpoint each); IoT
// refusing (403 AccessDeniedException) answers FAILED with IoT's reason;
// IoT unreachable, or no credentials, answers FAILED within seconds;
// Delete answers SUCCESS and calls nothing, even with nothing set up.
func TestIotEndpoint(t *testing.T) {
	t.Parallel()
	for _, rt := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate} {
		t.Run(string(rt)+"/Success", func(t *testing.T) {
			t.Parallel()
			url, calls := iotControlPlane(t, false)
			resp := runIotEndpoint(t, rt, iotEnv(url)...)
			if resp.Status != cfn.StatusSuccess || resp.Data["Address"] != discoveredEndpoint {
				t.Errorf("got %s (%s) with Data %v; want SUCCESS with Address %s", resp.Status, resp.Reason, resp.Data, discoveredEndpoint)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("DescribeEndpoint calls: got %d, want 1", n)
			}
		})
	}
	t.Run("Create/Refused", func(t *testing.T) {
		t.Parallel()
		url, calls := iotControlPlane(t, true)
		resp := runIotEndpoint(t, cfn.RequestCreate, iotEnv(url)...)
		if resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, "AccessDeniedException") ||
			!strings.Contains(resp.Reason, "not authorized to perform: iot:DescribeEndpoint") {
			t.Errorf("got %s, Reason %q; want FAILED with IoT's AccessDeniedException and message", resp.Status, resp.Reason)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("DescribeEndpoint calls: got %d, want 1 (a refusal is not tried again)", n)
		}
	})
	t.Run("Create/Unreachable", func(t *testing.T) {
		t.Parallel()
		resp := runIotEndpoint(t, cfn.RequestCreate, iotEnv("http://"+closedAddr(t))...)
		if resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, "iot:DescribeEndpoint") {
			t.Errorf("got %s, Reason %q; want FAILED naming iot:DescribeEndpoint", resp.Status, resp.Reason)
		}
	})
	t.Run("Create/NoCredentials", func(t *testing.T) {
		t.Parallel()
		resp := runIotEndpoint(t, cfn.RequestCreate, "AWS_REGION=us-east-1")
		if resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, "credentials") {
			t.Errorf("got %s, Reason %q; want FAILED naming the missing credentials", resp.Status, resp.Reason)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		url, calls := iotControlPlane(t, true)
		for _, env := range [][]string{iotEnv(url), nil} {
			if resp := runIotEndpoint(t, cfn.RequestDelete, env...); resp.Status != cfn.StatusSuccess {
				t.Errorf("env %q: got %s (%s), want SUCCESS", env, resp.Status, resp.Reason)
			}
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("DescribeEndpoint calls on Delete: got %d, want none", n)
		}
	})
}
