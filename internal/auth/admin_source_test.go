package auth_test

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

// TestAdminIdentityOnlyInAuth reads the whole repository's Go source
// (but tests): no code outside this package names AdminIdentity, the
// identity that acts on every workspace. The admin is whoever presents
// the admin token (Authenticator.Identify); a program that needs another
// authority gets one of its own, narrow and named for it (a download
// link's is pendinguploads' linkAccess, made from the verified link
// alone), never the admin's borrowed. Tests may act as the admin.
func TestAdminIdentityOnlyInAuth(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	fset := token.NewFileSet()
	read := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if filepath.ToSlash(rel) == "internal/auth" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
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
			// Any mention: a call, a function value, a dot-import's bare name.
			if id, ok := n.(*ast.Ident); ok && id.Name == "AdminIdentity" {
				t.Errorf("%s: auth.AdminIdentity outside package auth: the admin's identity is the admin token's alone",
					fset.Position(id.Pos()))
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
