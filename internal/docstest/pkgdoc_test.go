package docstest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// packageDocs returns each package directory of the modules (relative,
// slash-separated) with its package doc comment and its non-test .go
// files.
func packageDocs(t *testing.T, root string) map[string]pkgDoc {
	t.Helper()
	out := goList(t, root, "-f",
		`{{.Dir}}|{{join .GoFiles " "}} {{join .IgnoredGoFiles " "}}|{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}`)
	docs := map[string]pkgDoc{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		dir, rest, _ := strings.Cut(line, "|")
		files, tests, _ := strings.Cut(rest, "|")
		var d pkgDoc
		for _, name := range append(strings.Fields(files), strings.Fields(tests)...) {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if f.Doc != nil {
				d.text += f.Doc.Text()
			}
		}
		for _, name := range strings.Fields(files) {
			if !strings.HasSuffix(name, "_test.go") {
				d.files = append(d.files, name)
			}
		}
		rel, _ := filepath.Rel(root, dir)
		docs[filepath.ToSlash(rel)] = d
	}
	return docs
}

type pkgDoc struct {
	text  string
	files []string // its non-test .go files
}

var (
	// goFile is a file name a doc comment gives (stage.go, conditions_test.go).
	goFile = regexp.MustCompile(`(^|[^\w/.-])([\w-]+\.go)\b`)
	// repoPath is a path of the repository a doc comment gives
	// (internal/testkit/pgtest, testkit/apptest, functions/admin).
	repoPath = regexp.MustCompile(`(^|[\s(,'"])((?:internal|cmd|functions|client|clients|migrations|examples|docs|events|scripts|testkit)/[\w./-]*[\w])`)
)

// TestPackageDocsNameWhatExists: a file a package's doc comment names is
// a file of that package, and a path it names (internal/…, testkit/…,
// functions/…) exists in the repository.
func TestPackageDocsNameWhatExists(t *testing.T) {
	root := root(t)
	for dir, d := range packageDocs(t, root) {
		for _, m := range goFile.FindAllStringSubmatch(d.text, -1) {
			if _, err := os.Stat(filepath.Join(root, dir, m[2])); err != nil {
				t.Errorf("%s: its doc comment names %s, not a file of the package", dir, m[2])
			}
		}
		for _, m := range repoPath.FindAllStringSubmatch(d.text, -1) {
			p := strings.TrimSuffix(m[2], ".")
			// internal/httpapi.Routes is the package internal/httpapi.
			if i := strings.LastIndex(p, "/"); i >= 0 {
				if j := strings.Index(p[i:], "."); j > 0 && i+j+1 < len(p) && p[i+j+1] >= 'A' && p[i+j+1] <= 'Z' {
					p = p[:i+j]
				}
			}
			_, err := os.Stat(filepath.Join(root, p))
			if err != nil && strings.HasPrefix(p, "testkit/") {
				_, err = os.Stat(filepath.Join(root, "internal", p))
			}
			if err != nil {
				t.Errorf("%s: its doc comment names %s: nothing there", dir, p)
			}
		}
	}
}

// TestPackageToursNameEveryFile: a package doc comment that gives a tour
// of its files ("Where to look") names every non-test file of the
// package, so a file added or renamed shows up in the tour
// (internal/pendinguploads/doc.go).
func TestPackageToursNameEveryFile(t *testing.T) {
	tours := 0
	for dir, d := range packageDocs(t, root(t)) {
		if !strings.Contains(d.text, "Where to look") {
			continue
		}
		tours++
		for _, f := range d.files {
			if f != "doc.go" && !regexp.MustCompile(`\b`+regexp.QuoteMeta(f)+`\b`).MatchString(d.text) {
				t.Errorf("%s: its tour (Where to look) does not name %s", dir, f)
			}
		}
	}
	if tours == 0 {
		t.Error("no package doc comment has a tour (Where to look): internal/pendinguploads/doc.go lost its own?")
	}
}
