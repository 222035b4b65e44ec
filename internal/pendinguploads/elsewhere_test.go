//go:build cgo

package pendinguploads

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoStatementOnFilesElsewhere reads the whole repository's Go source
// (but tests): no text that names a table of a workspace's files (as a
// word, or read by Postgres's parser however it is spelt: a statement of
// any kind, TRUNCATE as well as SELECT) is written outside this package,
// where TestEveryStatementNamesCallerMayAct holds every statement to the
// guard, the migrations, which make the tables, and the test kit's
// database of the platform, and make scale's tool, which seeds a
// database of its own. A statement written in a command or a handler
// would escape that test. The checker is shown a TRUNCATE in cmd/ that a
// check by patterns let through (testdata/guard).
func TestNoStatementOnFilesElsewhere(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	allowed := map[string]bool{
		"internal/pendinguploads": true,
		"migrations":              true,
		"internal/testkit/pgtest": true, // the platform's schema for tests: its tables, their CHECK
		// make scale seeds and explains a throwaway database of its own;
		// it ships in no binary and acts for no caller.
		"internal/tools/scale": true,
	}
	read := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if allowed[filepath.ToSlash(rel)] || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		read++
		for _, p := range filesSQLIn(t, path) {
			t.Errorf("%s: make it a Store method in internal/pendinguploads, beside callerMayAct", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 100 {
		t.Fatalf("read %d files: the test no longer sees the repository", read)
	}
	t.Run("Dodges", func(t *testing.T) {
		if got := filesSQLIn(t, filepath.Join("testdata", "guard", "truncate_in_cmd.go.txt")); len(got) != 1 {
			t.Fatalf("got %q: want the TRUNCATE refused", got)
		}
	})
}

// filesSQLIn returns where the Go file path writes text that names a
// table of a workspace's files: each string, or sum of strings (other
// operands read as x), that does (mentionsFiles).
func filesSQLIn(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		e, ok := n.(ast.Expr)
		if !ok {
			return true
		}
		text, ok := stringSum(e)
		if !ok {
			return true
		}
		if mentionsFiles(text) {
			out = append(out, fmt.Sprintf("%s: SQL on a workspace's files outside internal/pendinguploads (%q)", fset.Position(e.Pos()), text))
		}
		return false // its parts are in it
	})
	return out
}

// stringSum returns the text of e when it is a string literal or a sum
// (+) holding one, its other operands read as x.
func stringSum(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			v, err := strconv.Unquote(e.Value)
			return v, err == nil
		}
	case *ast.ParenExpr:
		return stringSum(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, okX := stringSum(e.X)
			y, okY := stringSum(e.Y)
			if !okX {
				x = "x"
			}
			if !okY {
				y = "x"
			}
			return x + y, okX || okY
		}
	}
	return "", false
}
