package metrics

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/testkit/samtemplate"
)

// A metricRef is one metric of the service's namespace, by name and
// dimensions ("outcome=acked", sorted, comma-joined; "" for none).
type metricRef struct{ name, dims string }

func dimsKey(pairs map[string]string) string {
	var s []string
	for k, v := range pairs {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// moduleRoot is the directory of go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

// emitted reads the module's Go code (not its tests) and returns every
// metric it emits: each call x.Count(metrics.Name, dims, …) or
// x.Add(metrics.Name, unit, dims, …), with dims nil or a map literal of
// this package's constants.
func emitted(t *testing.T, root string) map[metricRef]bool {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
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
		if filepath.Dir(path) == filepath.Join(root, "internal", "metrics") {
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
			return nil
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	constOf := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "metrics" {
			return "", false
		}
		v, ok := consts[sel.Sel.Name]
		return v, ok
	}
	out := map[metricRef]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Count" && sel.Sel.Name != "Add") || len(call.Args) < 3 {
				return true
			}
			name, ok := constOf(call.Args[0])
			if !ok {
				return true
			}
			dimsArg := call.Args[1]
			if sel.Sel.Name == "Add" {
				dimsArg = call.Args[2]
			}
			dims := map[string]string{}
			switch d := dimsArg.(type) {
			case *ast.Ident:
				if d.Name != "nil" {
					t.Errorf("%s: dimensions of %s are not a literal", fset.Position(call.Pos()), name)
				}
			case *ast.CompositeLit:
				for _, el := range d.Elts {
					kv := el.(*ast.KeyValueExpr)
					k, ok1 := constOf(kv.Key)
					v, ok2 := constOf(kv.Value)
					if !ok1 || !ok2 {
						t.Errorf("%s: dimension of %s is not a metrics constant", fset.Position(call.Pos()), name)
					}
					dims[k] = v
				}
			default:
				t.Errorf("%s: dimensions of %s are not a literal", fset.Position(call.Pos()), name)
			}
			out[metricRef{name, dimsKey(dims)}] = true
			return true
		})
	}
	return out
}

// templateRefs returns the metrics of namespace that template.yaml's
// alarms and dashboards reference (its loops expanded, as CloudFormation
// expands them), and every namespace they use.
func templateRefs(t *testing.T, root, namespace string) (map[metricRef][]string, map[string]bool) {
	t.Helper()
	doc, err := samtemplate.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[metricRef][]string{}
	namespaces := map[string]bool{}
	resources := lookup(doc.Content[0], "Resources")
	if resources == nil {
		t.Fatal("template.yaml: no Resources")
	}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		props := lookup(res, "Properties")
		switch lookup(res, "Type").Value {
		case "AWS::CloudWatch::Alarm":
			ns := lookup(props, "Namespace")
			if ns == nil {
				t.Errorf("alarm %s: no Namespace (metric math is not checked here)", id)
				continue
			}
			namespaces[ns.Value] = true
			if ns.Value != namespace {
				continue
			}
			dims := map[string]string{}
			if d := lookup(props, "Dimensions"); d != nil {
				for _, item := range d.Content {
					dims[lookup(item, "Name").Value] = lookup(item, "Value").Value
				}
			}
			r := metricRef{lookup(props, "MetricName").Value, dimsKey(dims)}
			refs[r] = append(refs[r], "alarm "+id)
		case "AWS::CloudWatch::Dashboard":
			body := lookup(props, "DashboardBody")
			if inc := lookup(lookup(body, "Fn::Transform"), "Parameters"); inc != nil {
				// AWS::Include of a file whose content is {Fn::Sub: "…"}.
				body = includedSub(t, root, lookup(inc, "Location"))
			}
			if body == nil || body.Kind != yaml.ScalarNode {
				t.Fatalf("dashboard %s: DashboardBody is not a !Sub string, nor an AWS::Include of an Fn::Sub", id)
			}
			// ${…} in a JSON string stands for a name; bare, for a number.
			src := regexp.MustCompile(`"[^"\n]*\$\{[^}]+\}[^"\n]*"`).ReplaceAllString(body.Value, `"X"`)
			src = regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(src, `0`)
			var dash struct {
				Widgets []struct {
					Properties struct {
						Metrics [][]any `json:"metrics"`
					} `json:"properties"`
				} `json:"widgets"`
			}
			if err := json.Unmarshal([]byte(src), &dash); err != nil {
				t.Fatalf("dashboard %s: body is not JSON: %v", id, err)
			}
			for _, w := range dash.Widgets {
				for _, row := range w.Properties.Metrics {
					var strs []string
					for _, v := range row {
						if s, ok := v.(string); ok {
							strs = append(strs, s)
						}
					}
					if len(strs) < 2 || len(strs)%2 != 0 || strs[0] == "." || strs[1] == "..." {
						t.Errorf("dashboard %s: metric row %v: want [namespace, name, dim, value, …, {options}] in full", id, row)
						continue
					}
					namespaces[strs[0]] = true
					if strs[0] != namespace {
						continue
					}
					dims := map[string]string{}
					for j := 2; j+1 < len(strs); j += 2 {
						dims[strs[j]] = strs[j+1]
					}
					r := metricRef{strs[1], dimsKey(dims)}
					refs[r] = append(refs[r], "dashboard "+id)
				}
			}
		}
	}
	return refs, namespaces
}

// includedSub reads the file an AWS::Include names (relative to root) and
// returns its Fn::Sub string.
func includedSub(t *testing.T, root string, location *yaml.Node) *yaml.Node {
	t.Helper()
	if location == nil {
		t.Fatal("AWS::Include without a Location")
	}
	b, err := os.ReadFile(filepath.Join(root, location.Value))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", location.Value, err)
	}
	return lookup(doc.Content[0], "Fn::Sub")
}

func lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// TestTemplateMetricsAreEmitted holds template.yaml's alarms and dashboard
// to the metrics the code really emits: each metric of the service's
// namespace they reference is one that some call in the code emits, with
// the same dimensions; no other namespace than the service's, Lambda's
// and API Gateway's appears; and the dashboard shows every metric the code
// emits.
func TestTemplateMetricsAreEmitted(t *testing.T) {
	root := moduleRoot(t)
	code := emitted(t, root)
	if len(code) < 8 {
		t.Fatalf("found only %d emitted metrics in the code: %v", len(code), code)
	}
	refs, namespaces := templateRefs(t, root, Namespace)
	for ns := range namespaces {
		if ns != Namespace && ns != "AWS/Lambda" && ns != "AWS/ApiGateway" {
			t.Errorf("template.yaml uses namespace %q: the code emits under %q", ns, Namespace)
		}
	}
	for r, where := range refs {
		if !code[r] {
			t.Errorf("%s reference %s{%s}, which the code does not emit", strings.Join(where, ", "), r.name, r.dims)
		}
	}
	for r := range code {
		if !slices.ContainsFunc(refs[r], func(w string) bool { return strings.HasPrefix(w, "dashboard ") }) {
			t.Errorf("the code emits %s{%s}, which the dashboard does not show", r.name, r.dims)
		}
	}
}

// TestNamesHoldsEveryEmittedMetric: Names, the values METRICS may list,
// has every metric the code emits.
func TestNamesHoldsEveryEmittedMetric(t *testing.T) {
	for m := range emitted(t, moduleRoot(t)) {
		if !slices.Contains(Names, m.name) {
			t.Errorf("%s is emitted but not in Names", m.name)
		}
	}
}
