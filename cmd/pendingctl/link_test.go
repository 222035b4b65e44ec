package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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

	t.Run("HelpExample", func(t *testing.T) { linkHelpExample(t, vars, id, link, files["shared.txt"]) })

	expect(t, cli(t, vars, "link", "not-a-uuid"), exitUsage, "link with a bad FILE_ID")
	expect(t, cli(t, vars, "link"), exitUsage, "link without FILE_ID")
	expect(t, cli(t, vars, "link", uuid.NewString()), exitFailed, "link to a file that is not there")
}

// linkHelpExample runs link's help example as a person pastes it (bash,
// curl, pendingctl on PATH): the file lands under its own name; a link
// refused (its signature altered) leaves the answer, which says to ask
// for a new link, where the person can read it, as -f would not.
func linkHelpExample(t *testing.T, vars map[string]string, id, link string, want []byte) {
	for _, bin := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH, and CI is set", bin)
			}
			t.Skipf("%s is not on PATH", bin)
		}
	}
	var example string
	for _, l := range strings.Split(linkUsage, "\n") {
		if strings.HasPrefix(l, "  curl ") {
			example = strings.Replace(strings.TrimSpace(l), "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", id, 1)
		}
	}
	if example == "" {
		t.Fatalf("link's help has no curl example:\n%s", linkUsage)
	}
	// paste runs the example in a fresh folder with pendingctl the given
	// script, and returns curl's exit status and the folder.
	paste := func(t *testing.T, script string) (int, string) {
		t.Helper()
		bin, dir := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "pendingctl"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", example)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v\n%s", example, err, out)
		}
		t.Logf("%s: %s", example, out)
		return cmd.ProcessState.ExitCode(), dir
	}

	code, dir := paste(t, `exec "`+binary(t)+`" "$@"`+"\n")
	got, err := os.ReadFile(filepath.Join(dir, "shared.txt"))
	if code != 0 || err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: exit %d, shared.txt %q (%v); want exit 0 and the file", example, code, got, err)
	}

	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	sig := []byte(q.Get("signature"))
	sig[0] ^= 1
	q.Set("signature", string(sig))
	u.RawQuery = q.Encode()
	code, dir = paste(t, "echo '"+u.String()+"'\n")
	answer, err := os.ReadFile(filepath.Join(dir, "download"))
	if code != 22 || err != nil || !strings.Contains(string(answer), "ask for a new link") {
		t.Errorf("%s with an altered link: exit %d, ./download %q (%v); want exit 22 and the answer, which says to ask for a new link", example, code, answer, err)
	}
}
