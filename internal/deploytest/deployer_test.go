package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// deployerPermissions is testdata/deployer-permissions.yaml: what a
// deployer needs, by what calls it (its header says how it was derived).
type deployerPermissions struct {
	Schemas struct {
		Repository string `yaml:"repository"`
		Path       string `yaml:"path"`
		Commit     string `yaml:"commit"`
	} `yaml:"schemas"`
	Deployer []struct {
		What    string   `yaml:"what"`
		Source  string   `yaml:"source"`
		Actions []string `yaml:"actions"`
	} `yaml:"deployer"`
	Resources map[string]struct {
		Schema   string   `yaml:"schema"`
		Provider string   `yaml:"provider"`
		Source   string   `yaml:"source"`
		Actions  []string `yaml:"actions"`
	} `yaml:"resources"`
}

const deployerFile = "internal/deploytest/testdata/deployer-permissions.yaml"

// deployerSection is the heading of deploy.md's table.
const deployerSection = "### What a deployer needs (IAM)\n"

// iamAction is an IAM action as a policy names it, service:Action.
var iamAction = regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9]+$`)

func loadDeployerPermissions(t *testing.T) deployerPermissions {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), deployerFile))
	if err != nil {
		t.Fatal(err)
	}
	var d deployerPermissions
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", deployerFile, err)
	}
	return d
}

// table renders the data as deploy.md's table: SAM CLI's and
// CloudFormation's own rows first, in the file's order, then a row per
// resource type, sorted.
func (d deployerPermissions) table() string {
	codes := func(actions []string) string {
		if len(actions) == 0 {
			return "none"
		}
		var out []string
		for _, a := range actions {
			out = append(out, "`"+a+"`")
		}
		return strings.Join(out, ", ")
	}
	var b strings.Builder
	b.WriteString("| for | actions | from |\n|---|---|---|\n")
	for _, r := range d.Deployer {
		b.WriteString("| " + r.What + " | " + codes(r.Actions) + " | " + r.Source + " |\n")
	}
	for _, typ := range slices.Sorted(func(yield func(string) bool) {
		for k := range d.Resources {
			if !yield(k) {
				return
			}
		}
	}) {
		r := d.Resources[typ]
		from := r.Source
		if r.Schema != "" {
			from = "schema `" + strings.TrimPrefix(r.Schema, d.Schemas.Path) + "`"
			if r.Provider != "" {
				from += " (" + r.Provider + ")"
			}
		}
		b.WriteString("| `" + typ + "` | " + codes(r.Actions) + " | " + from + " |\n")
	}
	return b.String()
}

// TestDeployerTableIsTheData: deploy.md's table of what a deployer needs
// is testdata/deployer-permissions.yaml rendered, row for row, and names
// the schemas' commit; every action there is an IAM action's name, each
// row sourced. DEPLOYER_TABLE_UPDATE=1 writes the rendered table into
// deploy.md instead of failing.
func TestDeployerTableIsTheData(t *testing.T) {
	d := loadDeployerPermissions(t)
	if d.Schemas.Repository == "" || len(d.Schemas.Commit) != 40 || d.Schemas.Path == "" {
		t.Errorf("%s: schemas: want the repository, path and full commit they were read at", deployerFile)
	}
	for _, r := range d.Deployer {
		if r.What == "" || r.Source == "" || len(r.Actions) == 0 {
			t.Errorf("%s: deployer row %q: want what, source and actions", deployerFile, r.What)
		}
		for _, a := range r.Actions {
			if !iamAction.MatchString(a) {
				t.Errorf("%s: %q: %q is not an IAM action", deployerFile, r.What, a)
			}
		}
	}
	for typ, r := range d.Resources {
		if (r.Schema == "") == (r.Source == "") {
			t.Errorf("%s: %s: want its schema or, without handlers, its source (one of them)", deployerFile, typ)
		}
		if r.Schema != "" && !strings.HasPrefix(r.Schema, d.Schemas.Path) {
			t.Errorf("%s: %s: schema %s is not under %s", deployerFile, typ, r.Schema, d.Schemas.Path)
		}
		if len(r.Actions) == 0 && typ != "AWS::CloudFormation::WaitConditionHandle" {
			t.Errorf("%s: %s has no actions", deployerFile, typ)
		}
		for _, a := range r.Actions {
			if !iamAction.MatchString(a) {
				t.Errorf("%s: %s: %q is not an IAM action", deployerFile, typ, a)
			}
		}
	}

	path := filepath.Join(root(t), "docs", "deploy.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, deployerSection)
	if start < 0 {
		t.Fatalf("docs/deploy.md has no %q section", strings.TrimSpace(deployerSection))
	}
	end := len(doc)
	if i := strings.Index(doc[start+len(deployerSection):], "\n#"); i >= 0 {
		end = start + len(deployerSection) + i
	}
	section := doc[start:end]
	if !strings.Contains(section, d.Schemas.Commit[:12]) {
		t.Errorf("docs/deploy.md's %q: want the schemas' commit %s named", strings.TrimSpace(deployerSection), d.Schemas.Commit[:12])
	}
	// The table: the section's lines that start with "|", together.
	lines := strings.SplitAfter(section, "\n")
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "|") })
	if first < 0 {
		t.Fatalf("docs/deploy.md's %q has no table", strings.TrimSpace(deployerSection))
	}
	last := first
	for last < len(lines) && strings.HasPrefix(lines[last], "|") {
		last++
	}
	got, want := strings.Join(lines[first:last], ""), d.table()
	if got == want {
		return
	}
	if os.Getenv("DEPLOYER_TABLE_UPDATE") == "1" {
		section = strings.Join(lines[:first], "") + want + strings.Join(lines[last:], "")
		if err := os.WriteFile(path, []byte(doc[:start]+section+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("docs/deploy.md: the deployer's table rewritten from %s", deployerFile)
		return
	}
	gotRows, wantRows := strings.Split(got, "\n"), strings.Split(want, "\n")
	for _, r := range wantRows {
		if !slices.Contains(gotRows, r) {
			t.Errorf("docs/deploy.md's deployer table lacks the row\n%s", r)
		}
	}
	for _, r := range gotRows {
		if !slices.Contains(wantRows, r) {
			t.Errorf("docs/deploy.md's deployer table has a row %s does not make:\n%s", deployerFile, r)
		}
	}
	t.Errorf("docs/deploy.md's deployer table is not %s rendered (in that order); DEPLOYER_TABLE_UPDATE=1 go test -run TestDeployerTableIsTheData ./internal/deploytest/ writes it", deployerFile)
}

// artifactStackTypes are the resource types of SAM CLI's artifact-bucket
// stack (aws-sam-cli-managed-default, resolve_s3), which CloudFormation
// creates with the deployer's credentials too (aws/aws-sam-cli v1.161.1,
// samcli/lib/bootstrap/bootstrap.py).
var artifactStackTypes = []string{"AWS::S3::Bucket", "AWS::S3::BucketPolicy"}

// TestDeployerPermissionsCoverEveryType: every resource type that
// CloudFormation creates for any shape the deploy tests translate (the
// SAM transform's output: the functions' roles, versions and aliases,
// the API's deployment and stage, the custom resources), and those of
// SAM's artifact-bucket stack, has its row in
// testdata/deployer-permissions.yaml, and the file has no row for a type
// nothing creates. migrate's AutoPublishAlias, for one, makes an
// AWS::Lambda::Version and an AWS::Lambda::Alias, whose rows carry
// lambda:PublishVersion and the alias's actions.
func TestDeployerPermissionsCoverEveryType(t *testing.T) {
	d := loadDeployerPermissions(t)
	created := map[string]string{}
	for _, typ := range artifactStackTypes {
		created[typ] = "SAM's artifact-bucket stack"
	}
	for name := range translatedShapes {
		s := translated(t, name)
		for id, r := range s.resources() {
			if typ := scalar(get(r, "Type")); typ != "" {
				created[typ] = "shape " + name + "'s " + id
			}
		}
	}
	for typ, by := range created {
		if _, ok := d.Resources[typ]; !ok {
			t.Errorf("%s has no row for %s (%s)", deployerFile, typ, by)
		}
	}
	for typ := range d.Resources {
		if _, ok := created[typ]; !ok {
			t.Errorf("%s has a row for %s, which no translated shape creates", deployerFile, typ)
		}
	}
	for typ, action := range map[string]string{
		"AWS::Lambda::Version": "lambda:PublishVersion",
		"AWS::Lambda::Alias":   "lambda:CreateAlias",
		"Custom::Migrate":      "lambda:InvokeFunction",
	} {
		if !slices.Contains(d.Resources[typ].Actions, action) {
			t.Errorf("%s: %s's row lacks %s", deployerFile, typ, action)
		}
	}
}
