package humanize

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"testing"
)

// TestSameAsClient: this package's functions are the Go client's
// (client/internal/humanize), declaration for declaration, so that
// pendingctl's lines and the client's errors say a size the same way.
// The client module's own test checks what they return.
func TestSameAsClient(t *testing.T) {
	ours := funcs(t, "humanize.go")
	theirs := funcs(t, filepath.Join("..", "..", "client", "internal", "humanize", "humanize.go"))
	if len(ours) == 0 {
		t.Fatal("no functions in humanize.go")
	}
	for name, src := range ours {
		if theirs[name] != src {
			t.Errorf("%s differs from the client's (client/internal/humanize):\n%s\nthe client's:\n%s", name, src, theirs[name])
		}
	}
	for name := range theirs {
		if _, ok := ours[name]; !ok {
			t.Errorf("the client's humanize has %s, this package has not", name)
		}
	}
}

// funcs returns each function of the file at path, printed with its doc
// comment, by name.
func funcs(t *testing.T, path string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		var b bytes.Buffer
		if fn.Doc != nil {
			b.WriteString(fn.Doc.Text())
		}
		if err := printer.Fprint(&b, fset, fn); err != nil {
			t.Fatal(err)
		}
		out[fn.Name.Name] = b.String()
	}
	return out
}
