package main

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// describeStacks stands in for CloudFormation's DescribeStacks on a
// loopback port, in its query protocol: a form-encoded POST signed for
// the service "cloudformation", answered in XML. It knows one stack, with
// outputs; any other name is CloudFormation's 400 ValidationError.
func describeStacks(t *testing.T, stack string, outputs map[string]string) string {
	t.Helper()
	const ns = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.Form.Get("Action") != "DescribeStacks" ||
			r.Form.Get("Version") != "2010-05-15" || !strings.Contains(r.Header.Get("Authorization"), "/cloudformation/aws4_request") {
			t.Errorf("CloudFormation: got %s %v (Authorization %q), want a signed DescribeStacks", r.Method, r.Form, r.Header.Get("Authorization"))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		name := r.Form.Get("StackName")
		if name != stack {
			w.WriteHeader(http.StatusBadRequest)
			xml.NewEncoder(w).Encode(struct {
				XMLName   xml.Name `xml:"ErrorResponse"`
				NS        string   `xml:"xmlns,attr"`
				Type      string   `xml:"Error>Type"`
				Code      string   `xml:"Error>Code"`
				Message   string   `xml:"Error>Message"`
				RequestID string   `xml:"RequestId"`
			}{NS: ns, Type: "Sender", Code: "ValidationError", Message: "Stack with id " + name + " does not exist", RequestID: uuid.NewString()})
			return
		}
		type output struct {
			Key   string `xml:"OutputKey"`
			Value string `xml:"OutputValue"`
		}
		type stackXML struct {
			Name    string   `xml:"StackName"`
			ID      string   `xml:"StackId"`
			Created string   `xml:"CreationTime"`
			Status  string   `xml:"StackStatus"`
			Outputs []output `xml:"Outputs>member"`
		}
		s := stackXML{Name: stack, ID: "arn:aws:cloudformation:us-east-1:123456789012:stack/" + stack + "/5b4a3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d",
			Created: "2026-11-26T10:00:00.000Z", Status: "UPDATE_COMPLETE"}
		for k, v := range outputs {
			s.Outputs = append(s.Outputs, output{k, v})
		}
		xml.NewEncoder(w).Encode(struct {
			XMLName   xml.Name   `xml:"DescribeStacksResponse"`
			NS        string     `xml:"xmlns,attr"`
			Stacks    []stackXML `xml:"DescribeStacksResult>Stacks>member"`
			RequestID string     `xml:"ResponseMetadata>RequestId"`
		}{NS: ns, Stacks: []stackXML{s}, RequestID: uuid.NewString()})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// listStatus is the API's answer to a list of ws's uploads with token.
func listStatus(t *testing.T, srv *apptest.Server, ws uuid.UUID, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/workspaces/"+ws.String()+"/pending-uploads", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTokensThroughTheAdminFunction runs the built pendingctl against the
// real admin function binary, reached as Lambda is (an InvokeServer at
// AWS_ENDPOINT_URL_LAMBDA, dummy credentials) and found by --stack in a
// stand-in CloudFormation (AWS_ENDPOINT_URL_CLOUDFORMATION), with no
// DATABASE_URL at all: the token it creates is accepted by the API (200),
// list shows it without the token, revoke makes the API answer 401.
func TestTokensThroughTheAdminFunction(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	const stack, function = "pendinguploads", "pendinguploads-Admin-1A2B3C4D5E6F"
	fn := lambdatest.Start(t, lambdatest.Build(t, "admin"), []string{"DATABASE_URL=" + srv.DatabaseURL})
	lambdaAPI := lambdatest.ServeInvoke(t, map[string]*lambdatest.Runtime{function: fn})
	vars := map[string]string{
		"AWS_ENDPOINT_URL_LAMBDA":         lambdaAPI.URL,
		"AWS_ENDPOINT_URL_CLOUDFORMATION": describeStacks(t, stack, map[string]string{"ApiUrl": srv.URL, adminFunctionOutput: function}),
		"AWS_REGION":                      "us-east-1",
		"AWS_ACCESS_KEY_ID":               "AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":           "not-a-real-key",
		"HOME":                            t.TempDir(), // no shared AWS files
	}
	ws := uuid.New()

	r := exe(t, vars, "token", "create", "--stack", stack, "--workspace", ws.String(), "--json")
	expect(t, r, 0, "token create --stack")
	var created struct{ Token, ID, Prefix string }
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || !strings.HasPrefix(created.Token, "pu_") || created.ID == "" {
		t.Fatalf("create --json: got %q (%v), want a pu_ token and its id", r.stdout, err)
	}
	if got := listStatus(t, srv, ws, created.Token); got != http.StatusOK {
		t.Fatalf("the API with the new token: got %d, want 200", got)
	}

	r = exe(t, vars, "token", "list", "--function", function, "--workspace", ws.String())
	expect(t, r, 0, "token list --function")
	if !strings.Contains(r.stdout, created.ID) || !strings.Contains(r.stdout, created.Prefix) || strings.Contains(r.stdout, created.Token) {
		t.Errorf("list: got %q, want the id and prefix, never the token", r.stdout)
	}

	r = exe(t, vars, "token", "create", "--function", function, "--workspace", ws.String())
	expect(t, r, 0, "token create --function")
	second := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(second, "pu_") || strings.Contains(r.stderr, second) {
		t.Errorf("create: stdout %q, stderr %q; want the token on stdout alone", r.stdout, r.stderr)
	}

	expect(t, exe(t, vars, "token", "revoke", "--stack", stack, "--workspace", ws.String(), created.ID), 0, "token revoke --stack")
	if got := listStatus(t, srv, ws, created.Token); got != http.StatusUnauthorized {
		t.Errorf("the API with the revoked token: got %d, want 401", got)
	}
	if got := listStatus(t, srv, ws, second); got != http.StatusOK {
		t.Errorf("the API with the other token: got %d, want 200", got)
	}
	r = exe(t, vars, "token", "revoke", "--function", function, "--workspace", ws.String(), created.ID)
	expect(t, r, 1, "revoke again")
	if !strings.Contains(r.stderr, "no live token of workspace "+ws.String()+" matches") {
		t.Errorf("revoke again: stderr %q, want no live token matches", r.stderr)
	}
	if n := lambdaAPI.Invocations(); n != 5 {
		t.Errorf("invocations of the admin function: got %d, want 5, one per command", n)
	}

	t.Run("Failures", func(t *testing.T) {
		r := exe(t, vars, "token", "list", "--stack", "nope")
		expect(t, r, 1, "an unknown stack")
		if !strings.Contains(r.stderr, "stack nope") || !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("stderr %q, want CloudFormation's does not exist", r.stderr)
		}
		r = exe(t, vars, "token", "list", "--function", "nobody")
		expect(t, r, 1, "an unknown function")
		if !strings.Contains(r.stderr, "ResourceNotFoundException") {
			t.Errorf("stderr %q, want Lambda's ResourceNotFoundException", r.stderr)
		}
		expect(t, exe(t, vars, "token", "list", "--function", function, "--stack", stack), 2, "--function with --stack")

		// --workspace with the nil UUID names no workspace: refused, never
		// every workspace's tokens.
		r = exe(t, vars, "token", "list", "--function", function, "--workspace", uuid.Nil.String())
		expect(t, r, 1, "list --workspace with the nil UUID")
		if !strings.Contains(r.stderr, "bad_request") || strings.Contains(r.stdout, created.ID) {
			t.Errorf("list --workspace %s: stdout %q, stderr %q; want refused (bad_request), no token listed", uuid.Nil, r.stdout, r.stderr)
		}

		// A stack without the output: deployed before the admin function.
		old := vars["AWS_ENDPOINT_URL_CLOUDFORMATION"]
		vars["AWS_ENDPOINT_URL_CLOUDFORMATION"] = describeStacks(t, stack, map[string]string{"ApiUrl": srv.URL})
		r = exe(t, vars, "token", "list", "--stack", stack)
		vars["AWS_ENDPOINT_URL_CLOUDFORMATION"] = old
		expect(t, r, 1, "a stack without the output")
		if !strings.Contains(r.stderr, "no output AdminFunctionName") {
			t.Errorf("stderr %q, want it to name the missing output", r.stderr)
		}

		// The function cannot reach its database: a function error,
		// printed with its message.
		down := lambdatest.Start(t, lambdatest.Build(t, "admin"), []string{"DATABASE_URL=postgres://u:pw@" + closedAddr(t) + "/db?sslmode=disable&connect_timeout=2"})
		downAPI := lambdatest.ServeInvoke(t, map[string]*lambdatest.Runtime{function: down})
		vars := map[string]string{"AWS_ENDPOINT_URL_LAMBDA": downAPI.URL, "AWS_REGION": "us-east-1",
			"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-real-key", "HOME": t.TempDir()}
		r = exe(t, vars, "token", "create", "--function", function, "--workspace", ws.String())
		expect(t, r, 1, "a function whose database is down")
		if !strings.Contains(r.stderr, "the admin function "+function+" failed (Unhandled)") || !strings.Contains(r.stderr, "create token") {
			t.Errorf("stderr %q, want the function's error", r.stderr)
		}
		if downAPI.Invocations() != 1 {
			t.Errorf("invocations: got %d, want 1 (a create is never retried)", downAPI.Invocations())
		}
	})
}
