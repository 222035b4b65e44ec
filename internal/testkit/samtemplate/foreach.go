package samtemplate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The AWS::LanguageExtensions transform, as far as template.yaml uses it:
// Fn::ForEach in Resources, Conditions and Outputs, expanded as
// CloudFormation does before the SAM transform runs
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-foreach.html,
// and its examples: intrinsic-function-reference-foreach-example-resource.html).
// For each item of the collection the fragment is copied with every
// ${Identifier} in its keys and strings replaced by the item (&{Identifier}
// by the item without its non-alphanumeric characters), a Ref to the
// identifier replaced by the item, and what then names a literal resolved:
// a Ref or Fn::GetAtt whose name is an Fn::Sub (Ref: !Sub
// "PublicSubnet${Identifier}" is Ref PublicSubnetA), and an Fn::FindInMap
// whose keys are literals, with its DefaultValue when the map has no such
// key (intrinsic-function-reference-findinmap-enhancements.html).

// languageExtensions is the transform's name in Transform.
const languageExtensions = "AWS::LanguageExtensions"

var forEachKey = regexp.MustCompile(`^Fn::ForEach::[A-Za-z0-9]+$`)

// expandLanguageExtensions replaces every Fn::ForEach of doc's Resources,
// Conditions and Outputs by its expansion. A template with a loop must
// declare AWS::LanguageExtensions, before AWS::Serverless-2016-10-31 when
// both are declared (transform-aws-languageextensions.html, "Remarks"), as
// CloudFormation requires.
func expandLanguageExtensions(doc *yaml.Node) error {
	root := Get(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return nil
	}
	x := expander{mappings: Get(root, "Mappings")}
	declared, err := declaresLanguageExtensions(Get(root, "Transform"))
	if err != nil {
		return err
	}
	for _, section := range []string{"Resources", "Conditions", "Outputs"} {
		n := Get(root, section)
		if n == nil || n.Kind != yaml.MappingNode {
			continue
		}
		if !declared && slices.ContainsFunc(n.Content, func(k *yaml.Node) bool { return forEachKey.MatchString(k.Value) }) {
			return fmt.Errorf("%s: Fn::ForEach without Transform %s", section, languageExtensions)
		}
		out, err := x.expand(n, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", section, err)
		}
		n.Content = out.Content
	}
	return nil
}

// declaresLanguageExtensions reports whether Transform names the
// language extensions, and fails when they come after the SAM transform.
func declaresLanguageExtensions(t *yaml.Node) (bool, error) {
	if t == nil {
		return false, nil
	}
	names := []string{t.Value}
	if t.Kind == yaml.SequenceNode {
		names = nil
		for _, c := range t.Content {
			names = append(names, c.Value)
		}
	}
	le := slices.Index(names, languageExtensions)
	if sam := slices.Index(names, "AWS::Serverless-2016-10-31"); le >= 0 && sam >= 0 && sam < le {
		return false, fmt.Errorf("transform %s must come before AWS::Serverless-2016-10-31", languageExtensions)
	}
	return le >= 0, nil
}

// expander expands loops against the template's Mappings.
type expander struct {
	mappings *yaml.Node
}

// expand returns a copy of the mapping m with each Fn::ForEach key
// replaced, in place, by its expansion under params (identifier → item),
// and every other key and value substituted; a key made twice fails, as
// it fails CloudFormation's transform.
func (x expander) expand(m *yaml.Node, params map[string]string) (*yaml.Node, error) {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: m.Tag, Style: m.Style, Line: m.Line, Column: m.Column}
	seen := map[string]bool{}
	add := func(k, v *yaml.Node) error {
		if seen[k.Value] {
			return fmt.Errorf("line %d: %s is made twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		out.Content = append(out.Content, k, v)
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if !forEachKey.MatchString(k.Value) {
			nk := *k
			nk.Value = substitute(k.Value, params)
			nv, err := x.value(v, params)
			if err != nil {
				return nil, err
			}
			if name, _ := intrinsic(v); name == "Fn::FindInMap" && isNoValue(nv) {
				continue // a DefaultValue of AWS::NoValue leaves the key out
			}
			if err := add(&nk, nv); err != nil {
				return nil, err
			}
			continue
		}
		id, items, fragment, err := loopOf(k, v)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			inner := maps.Clone(params)
			if inner == nil {
				inner = map[string]string{}
			}
			inner[id] = item
			e, err := x.expand(fragment, inner)
			if err != nil {
				return nil, fmt.Errorf("%s (%s %s): %w", k.Value, id, item, err)
			}
			for j := 0; j+1 < len(e.Content); j += 2 {
				if err := add(e.Content[j], e.Content[j+1]); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// loopOf reads Fn::ForEach::Name: [Identifier, [items…], {OutputKey: OutputValue}].
// The collection must be a list of strings: a Ref to a CommaDelimitedList
// parameter would expand per deploy, which a test cannot know.
func loopOf(k, v *yaml.Node) (string, []string, *yaml.Node, error) {
	if v.Kind != yaml.SequenceNode || len(v.Content) != 3 {
		return noLoop(fmt.Errorf("line %d: %s takes [identifier, collection, fragment]", k.Line, k.Value))
	}
	id, coll, frag := v.Content[0], v.Content[1], v.Content[2]
	if id.Kind != yaml.ScalarNode || id.Value == "" {
		return noLoop(fmt.Errorf("line %d: %s: the identifier is not a string", id.Line, k.Value))
	}
	if coll.Kind != yaml.SequenceNode || coll.Tag != "!!seq" {
		return noLoop(fmt.Errorf("line %d: %s: the collection is not a list of strings (a Ref to a parameter is not read here)", coll.Line, k.Value))
	}
	var items []string
	for _, c := range coll.Content {
		if c.Kind != yaml.ScalarNode || strings.HasPrefix(c.Tag, "!") && !strings.HasPrefix(c.Tag, "!!") {
			return noLoop(fmt.Errorf("line %d: %s: a collection item is not a string", c.Line, k.Value))
		}
		items = append(items, c.Value)
	}
	if frag.Kind != yaml.MappingNode || len(frag.Content) == 0 {
		return noLoop(fmt.Errorf("line %d: %s: the fragment is not a mapping", frag.Line, k.Value))
	}
	for i := 0; i < len(frag.Content); i += 2 {
		key := frag.Content[i].Value
		if !forEachKey.MatchString(key) && !strings.Contains(key, "${"+id.Value+"}") && !strings.Contains(key, "&{"+id.Value+"}") {
			return noLoop(fmt.Errorf("line %d: %s: the output key %s does not name ${%s}, so every item would make the same key", frag.Content[i].Line, k.Value, key, id.Value))
		}
	}
	return id.Value, items, frag, nil
}

// noLoop is loopOf's answer when it fails.
func noLoop(err error) (string, []string, *yaml.Node, error) { return "", nil, nil, err }

var nonAlnum = regexp.MustCompile(`[^0-9A-Za-z]+`)

// substitute replaces ${id} and &{id} in s for every identifier of params.
func substitute(s string, params map[string]string) string {
	for id, v := range params {
		s = strings.ReplaceAll(s, "${"+id+"}", v)
		s = strings.ReplaceAll(s, "&{"+id+"}", nonAlnum.ReplaceAllString(v, ""))
	}
	return s
}

// value returns a copy of n with params put in: strings substituted, a Ref
// to an identifier replaced by its item, and Ref, Fn::GetAtt and
// Fn::FindInMap resolved where their arguments became literals. Outside
// a loop (no params) only the nested loops of a resource's properties are
// expanded.
func (x expander) value(n *yaml.Node, params map[string]string) (*yaml.Node, error) {
	c := *n
	c.Value = substitute(n.Value, params)
	c.Content = nil
	if n.Kind == yaml.MappingNode {
		e, err := x.expand(n, params)
		if err != nil {
			return nil, err
		}
		c.Content = e.Content
	} else {
		for _, e := range n.Content {
			v, err := x.value(e, params)
			if err != nil {
				return nil, err
			}
			c.Content = append(c.Content, v)
		}
	}
	name, args := intrinsic(&c)
	switch name {
	case "Ref":
		if len(args) != 1 {
			break
		}
		if item, ok := params[args[0].Value]; ok && (args[0].Tag == "!Ref" || args[0].Tag == "!!str") {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: item, Line: n.Line, Column: n.Column}, nil
		}
		if args[0].Tag != "!Ref" && args[0].Tag != "!!str" {
			if s, ok := literal(args[0]); ok {
				return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!Ref", Value: s, Line: n.Line, Column: n.Column}, nil
			}
		}
	case "Fn::GetAtt":
		if len(args) == 2 {
			r, okR := literal(args[0])
			a, okA := literal(args[1])
			if okR && okA {
				return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!GetAtt", Line: n.Line, Column: n.Column, Content: []*yaml.Node{
					{Kind: yaml.ScalarNode, Tag: "!!str", Value: r}, {Kind: yaml.ScalarNode, Tag: "!!str", Value: a}}}, nil
			}
		}
	case "Fn::FindInMap":
		return x.findInMap(&c, args)
	}
	return &c, nil
}

// findInMap resolves an Fn::FindInMap whose three keys are literals: the
// map's value, or its DefaultValue when the map has none; a missing key
// without a default fails, as it fails the stack. Any other is kept.
func (x expander) findInMap(n *yaml.Node, args []*yaml.Node) (*yaml.Node, error) {
	if len(args) != 3 && len(args) != 4 {
		return nil, fmt.Errorf("line %d: Fn::FindInMap takes 3 or 4 arguments", n.Line)
	}
	var keys []string
	for _, a := range args[:3] {
		s, ok := literal(a)
		if !ok {
			return n, nil
		}
		keys = append(keys, s)
	}
	if v := Get(x.mappings, keys...); v != nil {
		c := *v
		return &c, nil
	}
	if len(args) == 4 {
		if d := Get(args[3], "DefaultValue"); d != nil {
			return d, nil
		}
	}
	return nil, fmt.Errorf("line %d: Fn::FindInMap %s: no such entry in Mappings", n.Line, strings.Join(keys, "."))
}

// literal is the string a node stands for when it needs no stack to
// resolve: a plain scalar, or an Fn::Sub (either form of its name) with no
// ${…} left.
func literal(n *yaml.Node) (string, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "" || n.Tag == "!Sub") {
		return n.Value, n.Tag != "!Sub" || !strings.Contains(n.Value, "${")
	}
	if name, args := intrinsic(n); name == "Fn::Sub" && len(args) == 1 && args[0].Kind == yaml.ScalarNode {
		return args[0].Value, !strings.Contains(args[0].Value, "${")
	}
	return "", false
}

// intrinsic splits an intrinsic function, short form (!Ref X, !Sub …) or
// long ({Ref: X}, {"Fn::Sub": …}), into its name and arguments; "" for a
// node that is not one.
func intrinsic(n *yaml.Node) (string, []*yaml.Node) {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		name := "Fn::" + n.Tag[1:]
		if n.Tag == "!Ref" || n.Tag == "!Condition" {
			name = n.Tag[1:]
		}
		switch n.Kind {
		case yaml.SequenceNode:
			return name, n.Content
		case yaml.MappingNode:
			return name, []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map", Content: n.Content, Line: n.Line}}
		}
		return name, []*yaml.Node{n}
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k, v := n.Content[0].Value, n.Content[1]
		if k == "Ref" || strings.HasPrefix(k, "Fn::") {
			if v.Kind == yaml.SequenceNode && k != "Ref" {
				return k, v.Content
			}
			return k, []*yaml.Node{v}
		}
	}
	return "", nil
}

// isNoValue reports whether n is Ref AWS::NoValue, in either form.
func isNoValue(n *yaml.Node) bool {
	name, args := intrinsic(n)
	return name == "Ref" && len(args) == 1 && args[0].Value == "AWS::NoValue"
}
