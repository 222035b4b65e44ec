package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestLink: pendingctl link FILE_ID prints one line, a link that opens
// with a plain GET (no token) and gives the file; --json prints
// {"url","expires_at"}; a FILE_ID that is not a UUID is a usage error,
// a file that is gone a failure.
func TestLink(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	vars := apiVars(srv, "", srv.WorkspaceToken(t, ws))
	vars["PENDINGUPLOADS_WORKSPACE"] = ws.String()
	paths, files := fixture(t, map[string][]byte{"shared.txt": []byte("for a tool without a token\n")})
	expect(t, cli(t, vars, "upload", paths[0]), 0, "upload")
	var listed struct {
		Uploads []struct {
			FileID string `json:"file_id"`
		} `json:"uploads"`
	}
	r := cli(t, vars, "ls", "--json")
	expect(t, r, 0, "ls")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.Uploads) != 1 {
		t.Fatalf("ls --json: %q, %v", r.stdout, err)
	}
	id := listed.Uploads[0].FileID

	r = cli(t, vars, "link", id)
	expect(t, r, 0, "link")
	link := strings.TrimSpace(r.stdout)
	if strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(link, srv.URL+"/") || !strings.Contains(r.stderr, "expires") {
		t.Fatalf("link: stdout %q, stderr %q; want the link alone on stdout, its expiry on stderr", r.stdout, r.stderr)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != string(files["shared.txt"]) {
		t.Fatalf("GET the printed link: %d %q", resp.StatusCode, body)
	}

	r = cli(t, vars, "link", "--json", id)
	expect(t, r, 0, "link --json")
	var j struct {
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || !strings.HasPrefix(j.URL, srv.URL+"/") || j.ExpiresAt == "" {
		t.Fatalf("link --json: %q, %v", r.stdout, err)
	}

	expect(t, cli(t, vars, "link", "not-a-uuid"), exitUsage, "link with a bad FILE_ID")
	expect(t, cli(t, vars, "link"), exitUsage, "link without FILE_ID")
	expect(t, cli(t, vars, "link", uuid.NewString()), exitFailed, "link to a file that is not there")
}
