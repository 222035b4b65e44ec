package functions_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// behindCustomDomain returns event as API Gateway delivers it through a
// custom domain whose base path mapping is /uploads: the base path in
// front of the path (the resource stays the route's template), and the
// domain's name.
func behindCustomDomain(t *testing.T, event []byte) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	ev["path"] = "/uploads" + ev["path"].(string)
	rc := ev["requestContext"].(map[string]any)
	rc["path"] = "/uploads" + rc["path"].(string) // the stage's path, as the domain maps it
	rc["domainName"] = "uploads.example.com"
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withMethodAndResource returns event as another route's: for the
// preflight and the limits route, which have no sample event.
func withMethodAndResource(t *testing.T, event []byte, method, resource, path string, params map[string]any) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	ev["httpMethod"], ev["resource"], ev["path"], ev["pathParameters"] = method, resource, path, params
	ev["body"], ev["queryStringParameters"], ev["multiValueQueryStringParameters"] = nil, nil, nil
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCustomDomainBasePath: through the real bootstraps and the Runtime
// API, every route answers the same with and without a custom domain's
// base path in the event: the functions route by the event's resource
// and path parameters, not its path.
func TestCustomDomainBasePath(t *testing.T) {
	t.Parallel()
	env := dbEnv(knownDB(t))
	rts := map[string]*lambdatest.Runtime{}
	for _, fn := range httpFunctions {
		rts[fn] = start(t, fn, env...)
	}
	// Upload: both stage the event's two files.
	var staged [2]struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, rts["upload"], readEvent(t, "upload")), http.StatusOK, &staged[0])
	wantJSON(t, invokeHTTP(t, rts["upload"], behindCustomDomain(t, readEvent(t, "upload"))), http.StatusOK, &staged[1])
	if len(staged[0].Files) != 2 || len(staged[1].Files) != 2 {
		t.Fatalf("upload: got %d and %d files, want 2 and 2", len(staged[0].Files), len(staged[1].Files))
	}
	for i := range staged[0].Files {
		a, b := staged[0].Files[i], staged[1].Files[i]
		if a.Name != b.Name || a.Size != b.Size || a.SHA256 != b.SHA256 || a.MimeType != b.MimeType {
			t.Errorf("upload file %d: got %+v behind the domain, want %+v", i, b, a)
		}
	}
	fileID := staged[1].Files[1].FileID
	limitsEvent := withMethodAndResource(t, readEvent(t, "list"), "GET", "/uploads/limits", "/uploads/limits", nil)
	preflight := withMethodAndResource(t, readEvent(t, "list"), "OPTIONS", "/workspaces/{workspaceId}/pending-uploads",
		"/workspaces/"+workspacePlaceholder+"/pending-uploads", map[string]any{"workspaceId": workspacePlaceholder})
	for _, c := range []struct {
		name, fn string
		event    []byte
		status   int
	}{
		{"List", "list", readEvent(t, "list"), http.StatusOK},
		{"Limits", "list", limitsEvent, http.StatusOK},
		{"Preflight", "list", preflight, http.StatusNoContent},
		{"Content", "content", withFileID(readEvent(t, "content"), fileID), http.StatusOK},
		{"ContentGone", "content", readEvent(t, "content"), http.StatusNotFound},
		{"Presign", "presign", readEvent(t, "presign"), http.StatusNotFound},
		{"AckGone", "ack", readEvent(t, "ack"), http.StatusNotFound},
		{"Ack", "ack", withFileID(readEvent(t, "ack"), fileID), http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain := invokeHTTP(t, rts[c.fn], c.event)
			based := invokeHTTP(t, rts[c.fn], behindCustomDomain(t, c.event))
			if plain.StatusCode != c.status || based.StatusCode != c.status {
				t.Fatalf("status: got %d without and %d with the base path, want %d; bodies %s / %s",
					plain.StatusCode, based.StatusCode, c.status, plain.Body, based.Body)
			}
			if !bytes.Equal(responseBody(t, plain), responseBody(t, based)) {
				t.Errorf("body: got %q without and %q with the base path", plain.Body, based.Body)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Content-Disposition", "Content-Digest"} {
				if header(plain, h) != header(based, h) {
					t.Errorf("%s: got %q without and %q with the base path", h, header(plain, h), header(based, h))
				}
			}
		})
	}
}
