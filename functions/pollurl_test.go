package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// invokeURL invokes a function with a function URL event (payload 2.0)
// and decodes its answer.
func invokeURL(t *testing.T, rtEvent func() []byte, invoke func([]byte) []byte) events.LambdaFunctionURLResponse {
	t.Helper()
	var resp events.LambdaFunctionURLResponse
	payload := invoke(rtEvent())
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("function URL answer %s: %v", payload, err)
	}
	return resp
}

// TestPushPollThroughFunctionURL: the list function answers its function
// URL's events (events/list-url.json, payload 2.0), the poll's cheapest
// door, as it answers the REST API's: the same status and body for the
// same list, the bearer checked the same way (another workspace's token
// is refused, none is 401), and the public limits.
func TestPushPollThroughFunctionURL(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "list", dbEnv(url)...)
	pool := openPool(t, url)
	ws := uuid.MustParse(workspacePlaceholder)
	if _, err := pool.Exec(context.Background(), `INSERT INTO pending_uploads (file_id, workspace_id, filename, mimetype, size_bytes, content, sha256, expires_at)
		VALUES ($1, $2, 'a.txt', 'text/plain', 1, 'a', sha256('a'), now() + interval '1 hour')`, uuid.New(), ws); err != nil {
		t.Fatal(err)
	}
	mine, _, err := admin.CreateToken(context.Background(), pool, ws)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := admin.CreateToken(context.Background(), pool, uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	sample := readEvent(t, "list-url")
	as := func(bearer string) func() []byte {
		return func() []byte {
			return bytes.ReplaceAll(sample, []byte("Bearer "+adminToken), []byte(bearer))
		}
	}
	call := func(ev []byte) []byte { return invoke(t, rt, ev) }

	rest := invokeHTTP(t, rt, readEvent(t, "list"))
	got := invokeURL(t, as("Bearer "+adminToken), call)
	if got.StatusCode != http.StatusOK || got.Body != rest.Body || !bytes.Contains([]byte(got.Body), []byte(`"a.txt"`)) {
		t.Errorf("list through the function URL: got %d %s, want the REST API's 200 %s", got.StatusCode, got.Body, rest.Body)
	}
	if ct := got.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	if got := invokeURL(t, as("Bearer "+mine), call); got.StatusCode != http.StatusOK || got.Body != rest.Body {
		t.Errorf("the workspace's own token: got %d %s", got.StatusCode, got.Body)
	}
	for name, bearer := range map[string]string{"another workspace's token": "Bearer " + other, "no bearer": "X-None: x"} {
		if got := invokeURL(t, as(bearer), call); got.StatusCode < 400 || bytes.Contains([]byte(got.Body), []byte("a.txt")) {
			t.Errorf("%s: got %d %s, want a refusal", name, got.StatusCode, got.Body)
		}
	}
	limits := func() []byte {
		return bytes.ReplaceAll(bytes.ReplaceAll(sample, []byte("/workspaces/"+workspacePlaceholder+"/pending-uploads"), []byte("/uploads/limits")),
			[]byte(`"rawQueryString": "limit=50"`), []byte(`"rawQueryString": ""`))
	}
	if got := invokeURL(t, limits, call); got.StatusCode != http.StatusOK || !bytes.Contains([]byte(got.Body), []byte(`"push":null`)) {
		t.Errorf("limits through the function URL: got %d %s, want 200 with push null", got.StatusCode, got.Body)
	}
}
