package httpapi

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// answerLit is one Error literal of the package's source: its code and
// status as written, and its message when it is a constant.
type answerLit struct {
	at      string // file:line
	code    string // the wire constant's name ("" if none)
	status  int
	message string
}

// errorLiterals finds every Error composite literal in the package's
// non-test files.
func errorLiterals(t *testing.T) []answerLit {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []answerLit
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if id, isIdent := typeIdent(cl); !ok || !isIdent || id != "Error" {
				return true
			}
			lit := answerLit{at: fset.Position(cl.Pos()).String()}
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					t.Errorf("%s: Error literal without field names", lit.at)
					continue
				}
				switch kv.Key.(*ast.Ident).Name {
				case "Code":
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok && sel.X.(*ast.Ident).Name == "wire" {
						lit.code = sel.Sel.Name
					}
				case "Status":
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok {
						lit.status = statusNamed(sel.Sel.Name)
					}
				case "Message":
					if bl, ok := kv.Value.(*ast.BasicLit); ok {
						lit.message, _ = strconv.Unquote(bl.Value)
					} else if id, ok := kv.Value.(*ast.Ident); ok {
						lit.message = id.Name // a named constant
					}
				}
			}
			out = append(out, lit)
			return true
		})
	}
	return out
}

func typeIdent(cl *ast.CompositeLit) (string, bool) {
	if cl == nil {
		return "", false
	}
	id, ok := cl.Type.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}

// statusNamed is the status of net/http's constant name ("StatusConflict").
func statusNamed(name string) int {
	for s := 100; s < 600; s++ {
		if t := http.StatusText(s); t != "" && "Status"+strings.NewReplacer(" ", "", "-", "").Replace(t) == name {
			return s
		}
	}
	return 0
}

// wireCodes reads the Code constants of package wire: name to value.
func wireCodes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "client", "wire", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, n := range vs.Names {
				v, _ := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				codes[n.Name] = v
			}
		}
	}
	return codes
}

// apiCodes reads API.md's table of error codes: code to its statuses.
func apiCodes(t *testing.T) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Error codes\n")
	if !ok {
		t.Fatal("API.md has no section ## Error codes")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\| ([^|]+) \\|")
	status := regexp.MustCompile(`\b[1-5][0-9][0-9]\b`)
	out := map[string][]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		if _, dup := out[m[1]]; dup {
			t.Errorf("API.md lists code %s twice", m[1])
		}
		out[m[1]] = []int{}
		for _, s := range status.FindAllString(m[2], -1) {
			n, _ := strconv.Atoi(s)
			out[m[1]] = append(out[m[1]], n)
		}
	}
	return out
}

// TestErrorCodes: every Error of the package carries a code of package
// wire; a code names one meaning (its values are distinct, one message
// never carries two codes, and each answer's status is one API.md gives
// its code); and the codes are exactly API.md's table and openapi.yaml's
// ErrorCode enum.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	codes := wireCodes(t)
	if len(codes) == 0 {
		t.Fatal("no Code constants in client/wire/errors.go")
	}
	byValue := map[string]string{}
	for name, v := range codes {
		if other, dup := byValue[v]; dup {
			t.Errorf("wire.%s and wire.%s are both %q", name, other, v)
		}
		byValue[v] = name
	}
	documented := apiCodes(t)

	lits := errorLiterals(t)
	if len(lits) < 30 {
		t.Fatalf("found %d Error literals, want every answer of errors.go", len(lits))
	}
	codeOfMessage := map[string]string{}
	for _, l := range lits {
		v, ok := codes[l.code]
		if !ok {
			t.Errorf("%s: Error without a wire.Code (Code: %q)", l.at, l.code)
			continue
		}
		if l.status == 0 {
			t.Errorf("%s: Error whose Status is not an http.Status constant", l.at)
		} else if !slices.Contains(documented[v], l.status) {
			t.Errorf("%s: code %s with status %d; API.md gives it %v", l.at, v, l.status, documented[v])
		}
		if c, seen := codeOfMessage[l.message]; seen && c != v {
			t.Errorf("%s: message %q carries codes %s and %s", l.at, l.message, c, v)
		}
		codeOfMessage[l.message] = v
	}

	var fromWire, fromAPI, fromDoc []string
	for _, v := range codes {
		fromWire = append(fromWire, v)
	}
	for c := range documented {
		fromAPI = append(fromAPI, c)
	}
	schema := openAPIErrorCode(t)
	for _, e := range schema.Enum {
		fromDoc = append(fromDoc, e.(string))
	}
	slices.Sort(fromWire)
	slices.Sort(fromAPI)
	slices.Sort(fromDoc)
	if !slices.Equal(fromAPI, fromWire) {
		t.Errorf("API.md's table of codes:\n got %v\nwant %v (wire's)", fromAPI, fromWire)
	}
	if !slices.Equal(fromDoc, fromWire) {
		t.Errorf("openapi.yaml's ErrorCode enum:\n got %v\nwant %v (wire's)", fromDoc, fromWire)
	}
}

// openAPIErrorCode loads openapi.yaml's ErrorCode schema.
func openAPIErrorCode(t *testing.T) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	ref, ok := doc.Components.Schemas["ErrorCode"]
	if !ok || ref.Value == nil {
		t.Fatal("openapi.yaml has no components.schemas.ErrorCode")
	}
	return ref.Value
}
