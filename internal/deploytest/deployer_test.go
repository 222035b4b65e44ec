package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDeployerPermissionsNameEveryService: deploy.md's table of what a
// deployer needs names every AWS service whose resources the stack
// creates, as CloudFormation creates them with the deployer's
// credentials: each resource type's service, with SAM's functions and API
// expanded to what the transform makes of them (Lambda functions, their
// IAM roles, the sweep's EventBridge rule; an API Gateway REST API), and
// a custom resource's function invoked (lambda).
func TestDeployerPermissionsNameEveryService(t *testing.T) {
	dir := root(t)
	tpl, err := os.ReadFile(filepath.Join(dir, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]string{"cloudformation": "the stack itself", "s3": "SAM's artifact bucket"}
	expand := map[string][]string{
		"AWS::Serverless::Function": {"lambda", "iam", "events"},
		"AWS::Serverless::Api":      {"apigateway"},
	}
	for _, m := range regexp.MustCompile(`(?m)\bType:\s*["']?((?:AWS|Custom)::[\w:]+)`).FindAllStringSubmatch(string(tpl), -1) {
		typ := m[1]
		switch {
		case expand[typ] != nil:
			for _, svc := range expand[typ] {
				need[svc] = typ
			}
		case strings.HasPrefix(typ, "Custom::"):
			need["lambda"] = typ
		default:
			need[strings.ToLower(strings.Split(typ, "::")[1])] = typ
		}
	}

	doc, err := os.ReadFile(filepath.Join(dir, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "### What a deployer needs (IAM)\n")
	if !found {
		t.Fatal(`docs/deploy.md has no "### What a deployer needs (IAM)" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9]+)` \\|").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	for svc, why := range need {
		if !slices.Contains(listed, svc) {
			t.Errorf("deploy.md's deployer permissions do not name %s (the template has %s)", svc, why)
		}
	}
}
