package docstest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutEntries reads the map of docs/layout.md: the first column of each
// line of its code block that does not start with a space, split at
// commas. A later item without a slash that is not at the root names a
// sibling of the first ("internal/sweep, metrics" is internal/metrics);
// "<name>" stands for any one path element.
func layoutEntries(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	inFence := false
	column := regexp.MustCompile(`^(\S.*?)(\s{2,}|$)`)
	for _, line := range strings.Split(string(b), "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence || line == "" || line[0] == ' ' {
			continue
		}
		m := column.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		items := strings.Split(m[1], ",")
		first := strings.TrimSpace(items[0])
		entries = append(entries, first)
		for _, it := range items[1:] {
			it = strings.TrimSpace(it)
			if !strings.Contains(it, "/") {
				if _, err := os.Stat(filepath.Join(root, it)); err != nil {
					it = filepath.ToSlash(filepath.Join(filepath.Dir(strings.TrimSuffix(first, "/")), it))
				}
			}
			entries = append(entries, it)
		}
	}
	if len(entries) < 20 {
		t.Fatalf("docs/layout.md: %d entries in its map; is the map still a code block?", len(entries))
	}
	return entries
}

// TestLayoutIsTrue: every path the Layout map names exists, and every
// package of the repository's modules (the server's, the client's) lies
// under one of them, so a package added or moved shows up in the map.
func TestLayoutIsTrue(t *testing.T) {
	root := root(t)
	var covered []string // directories (and files) the map names, as they exist
	for _, e := range layoutEntries(t, root) {
		pattern := strings.ReplaceAll(strings.TrimSuffix(e, "/"), "<name>", "*")
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil || len(matches) == 0 {
			t.Errorf("docs/layout.md names %s: nothing there", e)
			continue
		}
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			covered = append(covered, filepath.ToSlash(rel))
		}
	}
	for _, dir := range strings.Fields(goList(t, root, "-f", "{{.Dir}}")) {
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		ok := false
		for _, c := range covered {
			// A directory the map names, one below it, or the directory
			// of a file it names (functions/*_test.go).
			if rel == c || strings.HasPrefix(rel, c+"/") || rel == filepath.ToSlash(filepath.Dir(c)) && strings.HasSuffix(c, ".go") {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("package %s is not in docs/layout.md's map", rel)
		}
	}
}

// goList runs go list with args and the pattern ./... in each Go module of
// the repository (the server's at root, the client's in client/: a folder
// with a go.mod) and returns their outputs, joined.
func goList(t *testing.T, root string, args ...string) string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 2 {
		t.Fatalf("%d Go modules in the repository, want the server's and the client's", len(mods))
	}
	var out strings.Builder
	for _, dir := range mods {
		cmd := exec.Command("go", append(append([]string{"list"}, args...), "./...")...)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		out.Write(b)
	}
	return out.String()
}
