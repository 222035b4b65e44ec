package docstest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGitIgnoresWhatRunsLeave: what the documented commands leave in a
// clone is git-ignored, so that `git status` after a first hour shows
// only the person's own changes: the dev server's folders (.local, and
// .local-2, which its own start error suggests for a second one), its
// binary, and the tarball `npm pack` makes of the browser client
// (clients/js/README.md).
func TestGitIgnoresWhatRunsLeave(t *testing.T) {
	root := root(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Skip("not a git work tree")
	}
	for _, p := range []string{
		".local/pg/PG_VERSION",
		".local-2/pg/PG_VERSION",
		".local-2/admin-token",
		"bin/devserver",
		"clients/js/pendinguploads-client-0.1.0.tgz",
		"clients/js/node_modules/typescript/package.json",
	} {
		// --no-index: the rules alone, whether or not the path exists.
		out, err := exec.Command("git", "-C", root, "check-ignore", "--no-index", "-v", p).CombinedOutput()
		if err != nil {
			t.Errorf("%s is not git-ignored (.gitignore): %v %s", p, err, strings.TrimSpace(string(out)))
		}
	}
}
