package docstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goLine is a go.mod's go directive.
var goLine = regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`)

// TestGoClientProgram: the workspace program docs/clients.md shows builds
// as a workspace's own module would, one that requires the client module
// alone (by a replace to this tree, since no tag is needed for the test):
// at the Go version the client's go.mod declares (go mod tidy would raise
// it if a requirement needed a newer Go), linking nothing of the server's
// module, no pgx and no AWS SDK, with none of them in its module graph.
// The page states that Go version.
func TestGoClientProgram(t *testing.T) {
	root := root(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Go client\n")
	if !ok {
		t.Fatal("docs/clients.md has no section Go client")
	}
	_, program, ok := strings.Cut(section, "\n```go\n")
	program, _, closed := strings.Cut(program, "\n```\n")
	if !ok || !closed {
		t.Fatal("docs/clients.md's Go client section shows no Go program")
	}
	clientMod, err := os.ReadFile(filepath.Join(root, "client", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := goLine.FindStringSubmatch(string(clientMod))
	if m == nil {
		t.Fatal("client/go.mod has no go line")
	}
	if !strings.Contains(section, "Go "+m[1]+" or later") {
		t.Errorf("docs/clients.md does not say the client needs Go %s or later, as client/go.mod does", m[1])
	}

	dir := t.TempDir()
	const clientPath = "github.com/pendinguploads/pendinguploads/client"
	goMod := "module example.com/agent\n\ngo " + m[1] + m[2] + "\n\nrequire " + clientPath + " v0.0.0\n\nreplace " +
		clientPath + " => " + filepath.Join(root, "client") + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), goMod)
	writeFile(t, filepath.Join(dir, "main.go"), program+"\n")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("vet", ".")
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if got := goLine.FindString(string(tidied)); got != "go "+m[1]+m[2] {
		t.Errorf("a program requiring the client needs %q, not the client's go %s%s:\n%s", got, m[1], m[2], tidied)
	}
	deps := strings.Fields(run("list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."))
	modules := strings.Fields(run("list", "-m", "-f", "{{.Path}}", "all"))
	for _, p := range append(deps, modules...) {
		server := strings.HasPrefix(p, "github.com/pendinguploads/pendinguploads") && !strings.HasPrefix(p, clientPath)
		if server || strings.Contains(p, "jackc/") || strings.Contains(p, "aws/") || strings.Contains(p, "golang-migrate") {
			t.Errorf("a program requiring the client takes %s", p)
		}
	}
	if len(deps) < 5 {
		t.Errorf("go list -deps: %q; did the program import the client?", deps)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestClientTestedAtUsersVersions: the client's tests that need the whole
// service (internal/clienttest, pendingctl) build the client in the
// server's module, whose requirements raise the client's own; a workspace
// program that requires the client alone gets client/go.mod's minimums.
// Every module the client's packages and tests link is selected at the
// same version in both, so what is tested is what users get: raise
// client/go.mod's minimums with the server's (cd client && go get
// MODULE@VERSION && go mod tidy).
func TestClientTestedAtUsersVersions(t *testing.T) {
	root := root(t)
	list := func(dir string, args ...string) map[string]string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, msg)
		}
		versions := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				versions[f[0]] = f[1]
			}
		}
		return versions
	}
	clientDir := filepath.Join(root, "client")
	// The modules of the client's packages and their tests, at the
	// versions the client module alone selects (what `go get` users get).
	linked := list(clientDir, "list", "-deps", "-test", "-f", "{{with .Module}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{end}}", "./...")
	server := list(root, "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if len(linked) < 3 {
		t.Fatalf("the client links modules %v; expected paho, flock, x/sync and more", linked)
	}
	for path, users := range linked {
		tested, ok := server[path]
		if !ok {
			t.Errorf("the client links %s %s, which the server's module does not select", path, users)
			continue
		}
		if tested != users {
			t.Errorf("%s: the client's tests in the server's module run at %s, its users get client/go.mod's %s", path, tested, users)
		}
	}
}
