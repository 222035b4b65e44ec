package pendinguploads

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoStatementOnFilesElsewhere reads the whole repository's Go source
// (but tests): no SQL on a workspace's files (tableRef) is written outside
// this package, where TestEveryStatementNamesCallerMayAct holds every
// statement to callerMayAct, the migrations, which make the tables, and
// make scale's tool, which seeds a database of its own.
// A statement written in a command or a handler would escape that test.
func TestNoStatementOnFilesElsewhere(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	// internal/tools/scale (make scale) seeds and explains a throwaway
	// database of its own; it ships in no binary and acts for no caller.
	allowed := map[string]bool{"internal/pendinguploads": true, "migrations": true, "internal/tools/scale": true}
	fset := token.NewFileSet()
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
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		read++
		ast.Inspect(f, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING && tableRef.MatchString(l.Value) {
				t.Errorf("%s: SQL on a workspace's files outside internal/pendinguploads: make it a Store method there, beside callerMayAct",
					fset.Position(l.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 100 {
		t.Fatalf("read %d files: the test no longer sees the repository", read)
	}
}
