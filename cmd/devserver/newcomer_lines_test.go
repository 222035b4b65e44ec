//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// TestNewcomerPrintedLines runs the banner's curl lines as a newcomer
// does, in the clone (where README.md, the file the first line stages, is
// already): stage, list, the content line twice in a row (each run saves
// the file, byte for byte, and neither touches the clone's README.md),
// ack. And the banner's line to build pendingctl is README's.
func TestNewcomerPrintedLines(t *testing.T) {
	for _, bin := range []string{"curl", "bash"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH, and CI is set", bin)
			}
			t.Skipf("%s is not on PATH", bin)
		}
	}
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("`"+pendingctlBuildLine+"`")) {
		t.Errorf("README does not say to build pendingctl with `%s`, the line the banner prints", pendingctlBuildLine)
	}

	stdout := startDevServer(t, localDevEnv(t, nil)).stdout
	banner := stdout.String()
	if !strings.Contains(banner, "pendingctl, in another shell ("+pendingctlBuildLine+"):") {
		t.Errorf("banner: no line to build pendingctl with %q:\n%s", pendingctlBuildLine, banner)
	}

	line := func(re string) string {
		m := regexp.MustCompile(`(?m)^  (` + re + `)$`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("banner lacks a line matching %s:\n%s", re, banner)
		}
		return m[1]
	}
	stage := line(`curl -sS -F files=@README.md .*`)
	list := line(`curl -sS -H '[^']*' \S+/pending-uploads`)
	content := line(`.*curl .*/pending-uploads/<file_id>/content.*`)
	ack := line(`curl -sS -X POST .*/pending-uploads/<file_id>/ack`)

	// The lines run in the clone, as a newcomer runs them; the folders
	// mktemp makes go under the test's.
	tmp := t.TempDir()
	sh := func(l string) []byte {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		cmd := exec.CommandContext(cctx, "bash", "-c", l)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", l, err, out, errb.String())
		}
		return out
	}
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if out := sh(stage); json.Unmarshal(out, &staged) != nil || len(staged.Files) != 1 {
		t.Fatalf("stage line answered %s", out)
	}
	id := staged.Files[0].FileID
	if out := sh(list); !bytes.Contains(out, []byte(id)) {
		t.Fatalf("list line answered %s, without %s", out, id)
	}
	var saved []string
	for range 2 {
		path := strings.TrimSpace(string(sh(strings.Replace(content, "<file_id>", id, 1))))
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, readme) || filepath.Base(path) != "README.md" || !strings.HasPrefix(path, tmp) {
			t.Fatalf("content line printed %q: %d bytes, %v; want README.md's %d bytes in a folder of its own", path, len(got), err, len(readme))
		}
		saved = append(saved, path)
	}
	if saved[0] == saved[1] {
		t.Errorf("both runs saved to %s", saved[0])
	}
	if now, err := os.ReadFile(filepath.Join(root, "README.md")); err != nil || !bytes.Equal(now, readme) {
		t.Errorf("the clone's README.md changed under the content line")
	}
	if out := sh(strings.Replace(ack, "<file_id>", id, 1)); !bytes.Contains(out, []byte(`"acked":true`)) {
		t.Fatalf("ack line answered %s", out)
	}
}
