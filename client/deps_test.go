package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// server is the server's module; this one, the client's, is server+"/client".
const server = "github.com/pendinguploads/pendinguploads"

// foreign are paths the client must never link or require: the database
// driver and migrations, the AWS SDK and Lambda, the server's broker and
// OpenAPI checker.
var foreign = []string{"jackc/", "aws/aws-sdk-go", "aws/aws-lambda-go", "aws/smithy-go", "golang-migrate/", "mochi-mqtt/", "getkin/kin-openapi"}

// TestLinksNoServer: the client module, built on workspace machines,
// links its own packages, the standard library and its few requirements,
// and nothing of the server: no package of the server's module, no
// database driver, no AWS SDK; its tests neither. Its module graph holds
// none of them either, so that `go get` of the client fetches none.
func TestLinksNoServer(t *testing.T) {
	pkgs := goList(t, "list", "-deps", "-test", "./...")
	if len(pkgs) < 10 {
		t.Fatalf("go list -deps: %d packages; is this the client module's root?", len(pkgs))
	}
	for _, pkg := range pkgs {
		// A test's packages: client_test (external tests), client.test (main).
		pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
		if strings.HasPrefix(pkg, server+"/") && pkg != server+"/client" && !strings.HasPrefix(pkg, server+"/client/") {
			t.Errorf("the client links %s, a package of the server's module", pkg)
		}
		for _, f := range foreign {
			if strings.Contains(pkg, f) {
				t.Errorf("the client links %s", pkg)
			}
		}
	}
	mods := goList(t, "list", "-m", "all")
	if len(mods) == 0 || mods[0] != server+"/client" {
		t.Fatalf("go list -m all: the main module is not the client's: %q", mods)
	}
	for _, m := range mods {
		if m == server {
			t.Errorf("the client module requires the server's module")
		}
		for _, f := range foreign {
			if strings.Contains(m, f) {
				t.Errorf("the client module's graph holds %s", m)
			}
		}
	}
}

// goList runs the go command in the package's folder, the client
// module's root, and returns the first word of each line of its output
// (an import path or a module path; a test variant's "[x.test]" is cut).
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	var first []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			first = append(first, f[0])
		}
	}
	return first
}
