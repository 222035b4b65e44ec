package functions_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
)

const (
	linkPath     = "/workspaces/{workspaceId}/pending-uploads/{fileId}/link"
	downloadPath = "/workspaces/{workspaceId}/pending-uploads/{fileId}/download"
)

// withQuery returns a REST API proxy event with its query string
// parameters (both maps, as API Gateway sends them) set to q.
func withQuery(t *testing.T, event []byte, q url.Values) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	single, multi := map[string]any{}, map[string]any{}
	for k, vs := range q {
		single[k] = vs[len(vs)-1]
		mv := make([]any, len(vs))
		for i, v := range vs {
			mv[i] = v
		}
		multi[k] = mv
	}
	ev["queryStringParameters"], ev["multiValueQueryStringParameters"] = single, multi
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLinkThroughTheContentFunction: the content function, built as
// Lambda builds it and driven through the Runtime API, mints a link on
// its link route for the events' admin bearer, and answers the link on
// its download route as API Gateway hands it over from a bare GET (no
// Authorization, no cookie): the file's bytes, streamed, with the content
// route's headers and Referrer-Policy: no-referrer; the link altered is a
// JSON 403 with its code. No line the process wrote carries the link's
// signature.
func TestLinkThroughTheContentFunction(t *testing.T) {
	t.Parallel()
	env := dbEnv(knownDB(t))
	upload, content := start(t, "upload", env...), start(t, "content", env...)
	var staged struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, upload, readEvent(t, "upload")), http.StatusOK, &staged)
	f, want := staged.Files[0], uploadFiles[0]
	params := map[string]string{"workspaceId": workspacePlaceholder, "fileId": f.FileID}

	var link struct {
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	wantJSON(t, invokeHTTP(t, content, routeEvent(t, "POST", linkPath, params, nil, nil)), http.StatusOK, &link)
	base, _ := url.Parse("https://api.example.com/v1/workspaces/" + workspacePlaceholder + "/pending-uploads/" + f.FileID + "/link")
	ref, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	u := base.ResolveReference(ref)
	if want := strings.Replace(base.Path, "/link", "/download", 1); u.Path != want {
		t.Fatalf("link %q resolves to %s, want the path %s", link.URL, u, want)
	}
	sig := u.Query().Get("signature")

	bare := map[string]string{"Authorization": "", "Cookie": ""}
	get := func(q url.Values) httpResponse {
		return invokeHTTP(t, content, withQuery(t, routeEvent(t, "GET", downloadPath, params, bare, nil), q))
	}
	resp := get(u.Query())
	if resp.StatusCode != http.StatusOK || !resp.Streamed {
		t.Fatalf("download: got %d (streamed %v) %s, want 200 streamed", resp.StatusCode, resp.Streamed, resp.Body)
	}
	if !bytes.Equal(responseBody(t, resp), want.data) {
		t.Errorf("download: got %d bytes, want the %d staged", len(responseBody(t, resp)), len(want.data))
	}
	wantHeaders(t, resp, map[string]string{
		"Content-Disposition":    `attachment; filename="` + want.sanitized + `"; filename*=UTF-8''` + want.sanitized,
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"Accept-Ranges":          "bytes",
	})
	if header(resp, "Content-Digest") == "" {
		t.Error("download: no Content-Digest")
	}

	altered := u.Query()
	altered.Set("signature", strings.ToUpper(sig))
	var refused struct{ Code string }
	wantJSON(t, get(altered), http.StatusForbidden, &refused)
	if refused.Code != "link_invalid" {
		t.Errorf("altered link: code %q, want link_invalid", refused.Code)
	}

	content.Stop()
	if logs := content.Logs(); !strings.Contains(logs, `"via":"link"`) || strings.Contains(logs, sig) {
		t.Errorf("the content function's lines: want the link's fetch, never its signature %s:\n%s", sig, logs)
	}
}

// TestLinkKeysFromTheDatabase: the content function started as a stack
// from zero starts it, with no secret at all (the admin token's SHA-256,
// no DOWNLOAD_LINK_KEY, no DOWNLOAD_LINK_KEY_SECRET_ARN), signs its links
// with the database's current key (download_link_keys, the link's key=
// its id) and opens them; after a rotation in the database (pendingctl
// linkkey rotate's statement) the link still opens, and a new one names
// the new key.
func TestLinkKeysFromTheDatabase(t *testing.T) {
	t.Parallel()
	dbURL := knownDB(t)
	sum := sha256.Sum256([]byte(adminToken))
	upload := start(t, "upload", dbEnv(dbURL)...)
	content := start(t, "content", "DATABASE_URL="+dbURL, "ADMIN_TOKEN_SHA256="+hex.EncodeToString(sum[:]))
	pool := openPool(t, dbURL)
	current := func() string {
		t.Helper()
		k, err := app.LinkKeysFromDatabase(context.Background(), pool)
		if err != nil {
			t.Fatal(err)
		}
		return downloadlink.KeyID(k.Current)
	}
	var staged struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, upload, readEvent(t, "upload")), http.StatusOK, &staged)
	params := map[string]string{"workspaceId": workspacePlaceholder, "fileId": staged.Files[0].FileID}
	mint := func() url.Values {
		t.Helper()
		var link struct {
			URL string `json:"url"`
		}
		wantJSON(t, invokeHTTP(t, content, routeEvent(t, "POST", linkPath, params, nil, nil)), http.StatusOK, &link)
		u, err := url.Parse(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query()
	}
	get := func(q url.Values) int {
		bare := map[string]string{"Authorization": "", "Cookie": ""}
		return invokeHTTP(t, content, withQuery(t, routeEvent(t, "GET", downloadPath, params, bare, nil), q)).StatusCode
	}
	first := mint()
	if got, want := first.Get("key"), current(); got != want {
		t.Fatalf("the link's key: got %s, want the database's current key %s", got, want)
	}
	if code := get(first); code != http.StatusOK {
		t.Fatalf("the link: got %d, want 200", code)
	}
	if _, err := app.RotateLinkKey(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	second := mint() // within a minute of the first read: perhaps the old key still
	if code := get(first); code != http.StatusOK {
		t.Errorf("the first link after the rotation: got %d, want 200", code)
	}
	if code := get(second); code != http.StatusOK {
		t.Errorf("a link minted after the rotation: got %d, want 200", code)
	}
}
