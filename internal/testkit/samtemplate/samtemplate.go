// Package samtemplate reads the repository's SAM template and function
// builds for tests: template.yaml as a yaml.Node (CloudFormation's short
// forms, !Ref, !Sub, !If, kept as tags), its Fn::ForEach loops expanded as
// the AWS::LanguageExtensions transform expands them before the SAM
// transform runs (foreach.go), and lambda.mk's LAMBDA_FUNCTIONS
// (each logical ID with its directory under functions/). The template
// tests (internal/deploytest) and the tests that run the function
// binaries as the template deploys them (functions/) read both through it.
package samtemplate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Read parses template.yaml under root (the module's root), with every
// Fn::ForEach of its Resources, Conditions and Outputs expanded: the
// resources it makes are there by their logical IDs, as CloudFormation
// hands them to the SAM transform. A loop it cannot expand fails.
func Read(root string) (*yaml.Node, error) {
	b, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse parses a template as Read does.
func Parse(b []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("template.yaml: %w", err)
	}
	if err := expandLanguageExtensions(&doc); err != nil {
		return nil, fmt.Errorf("template.yaml: %w", err)
	}
	return &doc, nil
}

// Get walks mapping keys from n (a document or a mapping) and returns the
// node found, or nil.
func Get(n *yaml.Node, keys ...string) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

var functionsLine = regexp.MustCompile(`(?m)^LAMBDA_FUNCTIONS\s*:?=(.*)$`)

// LambdaFunctions reads lambda.mk's LAMBDA_FUNCTIONS under root: logical
// ID → directory under functions/, the builds sam runs.
func LambdaFunctions(root string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "lambda.mk"))
	if err != nil {
		return nil, err
	}
	m := functionsLine.FindStringSubmatch(strings.ReplaceAll(string(b), "\\\n", " "))
	if m == nil {
		return nil, fmt.Errorf("lambda.mk: no LAMBDA_FUNCTIONS line")
	}
	fns := make(map[string]string)
	for _, pair := range strings.Fields(m[1]) {
		id, dir, ok := strings.Cut(pair, ":")
		if !ok || id == "" || dir == "" {
			return nil, fmt.Errorf("lambda.mk: LAMBDA_FUNCTIONS entry %q is not LogicalId:dir", pair)
		}
		fns[id] = dir
	}
	return fns, nil
}
