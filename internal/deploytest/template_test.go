package deploytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/samtemplate"
)

// root returns the module root.
func root(t *testing.T) string {
	t.Helper()
	dir, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCfnLint(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("cfn-lint is not on PATH, and CI is set: install it (pip install cfn-lint)")
		}
		t.Skip("cfn-lint is not on PATH; skipping the template lint (install it: pip install cfn-lint)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "template.yaml")
	cmd.Dir = root(t)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

// function is one AWS::Serverless::Function of template.yaml.
type function struct {
	id   string
	node *yaml.Node // the resource
}

// route is one AWS::Lambda::Permission of template.yaml that lets API
// Gateway invoke a function: its method and path (path parameters as *),
// the API and stage its SourceArn names.
type route struct {
	permission, function, method, path, api, stage string
}

// template is template.yaml, parsed.
type template struct {
	doc       *yaml.Node
	functions map[string]function
}

func loadTemplate(t *testing.T) template {
	t.Helper()
	doc, err := samtemplate.Read(root(t))
	if err != nil {
		t.Fatal(err)
	}
	tpl := template{doc: doc, functions: make(map[string]function)}
	resources := get(doc, "Resources")
	if resources == nil || resources.Kind != yaml.MappingNode {
		t.Fatal("template.yaml: no Resources mapping")
	}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		if scalar(get(res, "Type")) == "AWS::Serverless::Function" {
			tpl.functions[id] = function{id: id, node: res}
		}
	}
	return tpl
}

// executeAPIArn is the SourceArn of an API Gateway permission, as the
// template writes it (an Fn::Sub, its variables put in):
// ${Api}/${Api.Stage}/METHOD/path.
var executeAPIArn = regexp.MustCompile(`^arn:\$\{AWS::Partition\}:execute-api:\$\{AWS::Region\}:\$\{AWS::AccountId\}:\$\{([^}]*)\}/\$\{([^}]*)\}/([A-Z]+)(/.*)$`)

// routes returns every permission of API Gateway to invoke a function,
// sorted; a SourceArn not of the form above is a route with no method.
func (tpl template) routes() []route {
	var rs []route
	res := get(tpl.doc, "Resources")
	for i := 0; i+1 < len(res.Content); i += 2 {
		p := get(res.Content[i+1], "Properties")
		if scalar(get(res.Content[i+1], "Type")) != "AWS::Lambda::Permission" || scalar(get(p, "Principal")) != "apigateway.amazonaws.com" {
			continue
		}
		r := route{permission: res.Content[i].Value, function: ref(get(p, "FunctionName"))}
		if m := executeAPIArn.FindStringSubmatch(subString(get(p, "SourceArn"))); m != nil {
			r.api, r.stage, r.method, r.path = m[1], m[2], m[3], m[4]
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b route) int { return strings.Compare(a.method+" "+a.path, b.method+" "+b.path) })
	return rs
}

// get is samtemplate.Get: the node at keys under n, or nil.
func get(n *yaml.Node, keys ...string) *yaml.Node { return samtemplate.Get(n, keys...) }

// scalar returns a plain scalar's value, or "" for anything else (an
// intrinsic function included).
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "") {
		return ""
	}
	return n.Value
}

// ref returns the logical ID of a !Ref or {"Ref": ...}, or "".
func ref(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!Ref" {
		return n.Value
	}
	return scalar(get(n, "Ref"))
}

// getAtt returns "Id.Attr" of a !GetAtt or {"Fn::GetAtt": [...]}, or "".
func getAtt(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Tag == "!GetAtt" {
		if n.Kind == yaml.ScalarNode {
			return n.Value
		}
		if n.Kind == yaml.SequenceNode && len(n.Content) == 2 {
			return n.Content[0].Value + "." + n.Content[1].Value
		}
	}
	if l := get(n, "Fn::GetAtt"); l != nil && l.Kind == yaml.SequenceNode && len(l.Content) == 2 {
		return l.Content[0].Value + "." + l.Content[1].Value
	}
	return ""
}

// makeFunctions reads lambda.mk's LAMBDA_FUNCTIONS: logical ID -> directory.
func makeFunctions(t *testing.T) map[string]string {
	t.Helper()
	fns, err := samtemplate.LambdaFunctions(root(t))
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

// titleCase is the logical ID convention: the directory with its first
// letter upper-cased.
func titleCase(dir string) string {
	if dir == "" {
		return ""
	}
	return strings.ToUpper(dir[:1]) + dir[1:]
}

var pathParam = regexp.MustCompile(`\{([^}]*)\}`)

// TestRoutes: API Gateway may invoke each function on exactly the routes
// it serves in httpapi.Routes, plus an OPTIONS preflight on each path, on
// the v1 stage only: one AWS::Lambda::Permission per route, scoped to
// ${Api}/${Api.Stage}, its method and its path. No function has an Api
// event, whose permission SAM scopes to every stage. A route without its
// permission would answer 500; a permission without a route, or on every
// stage, lets the API invoke what it should not.
func TestRoutes(t *testing.T) {
	tpl := loadTemplate(t)
	dirs := makeFunctions(t)

	want := make(map[string]httpapi.Route) // by method and path with parameters as *
	for _, r := range httpapi.Routes {
		for _, m := range []string{r.Method, "OPTIONS"} {
			want[m+" "+pathParam.ReplaceAllString(r.Path, "*")] = r
		}
	}
	for id, fn := range tpl.functions {
		events := get(fn.node, "Properties", "Events")
		for i := 0; events != nil && i+1 < len(events.Content); i += 2 {
			if typ := scalar(get(events.Content[i+1], "Type")); typ == "Api" || typ == "HttpApi" {
				t.Errorf("template.yaml: %s has the %s event %s; SAM's permission for it allows every stage: write an AWS::Lambda::Permission", id, typ, events.Content[i].Value)
			}
		}
	}

	seen := make(map[string]string) // route -> function serving it
	for _, r := range tpl.routes() {
		key := r.method + " " + r.path
		where := fmt.Sprintf("template.yaml: %s (%s on %s)", r.permission, key, r.function)
		if r.method == "" {
			t.Errorf("%s: SourceArn is not !Sub \"arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Api}/${Api.Stage}/METHOD/path\"", where)
			continue
		}
		if r.api != "Api" || r.stage != "Api.Stage" {
			t.Errorf("%s: SourceArn names ${%s}/${%s}, want ${Api}/${Api.Stage} (the REST API's v1 stage only)", where, r.api, r.stage)
		}
		if prev, dup := seen[key]; dup {
			t.Errorf("%s: route already allowed for %s", where, prev)
			continue
		}
		seen[key] = r.function
		api, ok := want[key]
		if !ok {
			t.Errorf("%s: not a route of httpapi.Routes or its preflight", where)
			continue
		}
		dir, ok := dirs[r.function]
		if !ok {
			dir = strings.ToLower(r.function)
		}
		if dir != api.Function {
			t.Errorf("%s: invokes functions/%s, but httpapi.Routes names function %s", where, dir, api.Function)
		}
	}
	for key, r := range want {
		if _, ok := seen[key]; !ok {
			t.Errorf("httpapi.Routes has %s %s (function %s), but no permission in template.yaml lets API Gateway invoke it as %s", r.Method, r.Path, r.Function, key)
		}
	}
}

func TestFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	mk := makeFunctions(t)
	base := root(t)

	entries, err := os.ReadDir(filepath.Join(base, "functions"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	onDisk := make(map[string]bool)
	for _, e := range entries {
		if e.IsDir() {
			onDisk[e.Name()] = true
		}
	}

	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range tpl.functions {
			if !yield(id) {
				return
			}
		}
	})
	var missing []string
	inTemplate := make(map[string]bool)
	for _, id := range ids {
		fn := tpl.functions[id]
		dir, ok := mk[id]
		if !ok {
			t.Errorf("template.yaml: function %s has no LogicalId:dir entry in lambda.mk's LAMBDA_FUNCTIONS, so sam build has no build-%s target", id, id)
			continue
		}
		inTemplate[dir] = true
		if titleCase(dir) != id {
			t.Errorf("lambda.mk: %s:%s breaks the convention LogicalId = title-case directory (want %s:%s)", id, dir, titleCase(dir), dir)
		}
		if bm := scalar(get(fn.node, "Metadata", "BuildMethod")); bm != "makefile" {
			t.Errorf("template.yaml: %s: got Metadata.BuildMethod %q, want makefile", id, bm)
		}
		codeURI := get(fn.node, "Properties", "CodeUri")
		if codeURI == nil {
			codeURI = get(tpl.doc, "Globals", "Function", "CodeUri")
		}
		if scalar(codeURI) != "." {
			t.Errorf("template.yaml: %s: got CodeUri %q, want \".\" (the repository root, where sam build runs make build-%s)", id, scalar(codeURI), id)
		}
		if !onDisk[dir] {
			missing = append(missing, fmt.Sprintf("functions/%s (template.yaml %s, make build-%s)", dir, id, id))
			continue
		}
		if gofiles, _ := filepath.Glob(filepath.Join(base, "functions", dir, "*.go")); len(gofiles) == 0 {
			t.Errorf("functions/%s has no Go files", dir)
		}
	}
	if len(missing) > 0 {
		t.Errorf("template.yaml deploys %d function(s) whose directory does not exist:\n\t%s", len(missing), strings.Join(missing, "\n\t"))
	}
	for id, dir := range mk {
		if _, ok := tpl.functions[id]; !ok {
			t.Errorf("lambda.mk builds %s (functions/%s), which template.yaml does not deploy", id, dir)
		}
	}
	for _, dir := range slices.Sorted(func(yield func(string) bool) {
		for d := range onDisk {
			if !yield(d) {
				return
			}
		}
	}) {
		if !inTemplate[dir] {
			t.Errorf("functions/%s has no function in template.yaml (want %s, with an entry %s:%s in lambda.mk); functions/ holds only deployed functions", dir, titleCase(dir), titleCase(dir), dir)
		}
	}
}

func TestGlobals(t *testing.T) {
	tpl := loadTemplate(t)
	g := get(tpl.doc, "Globals", "Function")
	for _, c := range []struct{ path, want string }{
		{"Runtime", "provided.al2023"},
		{"Handler", "bootstrap"},
		{"LoggingConfig.LogFormat", "JSON"},
	} {
		if got := scalar(get(g, strings.Split(c.path, ".")...)); got != c.want {
			t.Errorf("Globals.Function.%s: got %q, want %q", c.path, got, c.want)
		}
	}
	if a := get(g, "Architectures"); a == nil || a.Kind != yaml.SequenceNode || len(a.Content) != 1 || a.Content[0].Value != "arm64" {
		t.Errorf("Globals.Function.Architectures: want [arm64]")
	}
	for id, fn := range tpl.functions {
		for _, k := range []string{"Runtime", "Handler", "Architectures"} {
			if get(fn.node, "Properties", k) != nil {
				t.Errorf("template.yaml: %s overrides Globals' %s", id, k)
			}
		}
	}
}

func TestSweepAndMigrate(t *testing.T) {
	tpl := loadTemplate(t)
	t.Run("SweepSchedule", func(t *testing.T) {
		sweep, ok := tpl.functions["Sweep"]
		if !ok {
			t.Fatal("template.yaml: no Sweep function")
		}
		events := get(sweep.node, "Properties", "Events")
		found := false
		for i := 0; events != nil && i+1 < len(events.Content); i += 2 {
			ev := events.Content[i+1]
			if scalar(get(ev, "Type")) == "Schedule" && onSweepSchedule(get(ev, "Properties", "Schedule"), "Schedule") {
				found = true
			}
		}
		if !found {
			t.Error("template.yaml: Sweep has no Schedule event on SweepEvery's schedule (SweepSchedules)")
		}
	})
	t.Run("MigrateCustomResource", func(t *testing.T) {
		resources := get(tpl.doc, "Resources")
		var found []string
		for i := 0; i+1 < len(resources.Content); i += 2 {
			res := resources.Content[i+1]
			typ := scalar(get(res, "Type"))
			if (typ == "AWS::CloudFormation::CustomResource" || strings.HasPrefix(typ, "Custom::")) &&
				getAtt(get(res, "Properties", "ServiceToken")) == "Migrate.Arn" {
				found = append(found, resources.Content[i].Value)
			}
		}
		if len(found) != 1 {
			t.Errorf("template.yaml: got custom resources %v with ServiceToken !GetAtt Migrate.Arn, want exactly one", found)
		}
	})
}

// TestAdminFunction: the admin function (tokens without a tunnel) has no
// event, so nothing but an IAM-signed Invoke reaches it, and the output
// pendingctl token --stack reads names it.
func TestAdminFunction(t *testing.T) {
	tpl := loadTemplate(t)
	fn, ok := tpl.functions["Admin"]
	if !ok {
		t.Fatal("template.yaml: no Admin function")
	}
	if ev := get(fn.node, "Properties", "Events"); ev != nil {
		t.Errorf("template.yaml: Admin has Events; it must be reached only by lambda:InvokeFunction")
	}
	if ref(get(tpl.doc, "Outputs", "AdminFunctionName", "Value")) != "Admin" {
		t.Errorf("template.yaml: want an output AdminFunctionName of !Ref Admin (pendingctl token --stack reads it)")
	}
}

// TestMakeTargets checks that make build-<LogicalId> builds what Lambda
// runs, from the directory the template says.
func TestMakeTargets(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not on PATH")
	}
	for id, dir := range makeFunctions(t) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, mk, "-n", "-s", "-f", "lambda.mk", "build-"+id, "ARTIFACTS_DIR=/artifacts")
		cmd.Dir = root(t)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("make -n build-%s: %v\n%s", id, err, out)
			continue
		}
		got := string(out)
		for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "go build", "-tags lambda.norpc",
			"-trimpath", "-ldflags='-s -w'", "-o /artifacts/bootstrap", "./functions/" + dir + "\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("make -n build-%s: %q lacks %q", id, got, want)
			}
		}
	}
}
