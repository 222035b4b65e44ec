package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLinksNoServer: the client, built on workspace machines, links the
// wire types and small internal packages of pure functions (the limits,
// sizes for people, the filename sanitizer the inbox applies again),
// and nothing of the server: no handlers, no store, no database or AWS
// SDK.
func TestLinksNoServer(t *testing.T) {
	const module = "github.com/pendinguploads/pendinguploads/"
	allowed := []string{"client", "client/inbox", "client/wire", "internal/limits", "internal/humanize", "internal/sanitize"}
	out, err := exec.Command("go", "list", "-deps", ".", "./inbox").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(pkg, module); ok && !slices.Contains(allowed, rest) {
			t.Errorf("the client links %s", pkg)
		}
		if strings.Contains(pkg, "jackc/pgx") || strings.Contains(pkg, "aws-sdk-go") {
			t.Errorf("the client links %s", pkg)
		}
	}
}
