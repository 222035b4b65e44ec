package deploytest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// shape is template.yaml as CloudFormation sees it for one set of
// parameters: the parameters' values (each a list; a String is a list of
// one, a CommaDelimitedList is split on commas as CloudFormation does, ""
// into [""]), and the Conditions evaluated over them. It knows the
// condition functions (Fn::Equals, Fn::Not, Fn::And, Fn::Or, Condition),
// the rule function Fn::EachMemberEquals, and Ref and Fn::Join of
// parameters, in their short (!Equals) and long ({"Fn::Equals": …})
// forms; anything else in a condition fails the test rather than being
// guessed.
type shape struct {
	t      *testing.T
	tpl    template
	params map[string][]string
	lists  map[string]bool // CommaDelimitedList parameters
	conds  map[string]bool
}

// newShape evaluates template.yaml for its parameters' defaults, with
// overrides on top; a parameter without a default must be overridden.
func newShape(t *testing.T, tpl template, overrides map[string]string) *shape {
	t.Helper()
	s := &shape{t: t, tpl: tpl, params: map[string][]string{}, lists: map[string]bool{}, conds: map[string]bool{}}
	params := get(tpl.doc, "Parameters")
	for i := 0; i+1 < len(params.Content); i += 2 {
		name, p := params.Content[i].Value, params.Content[i+1]
		v, ok := overrides[name]
		if !ok {
			d := get(p, "Default")
			if d == nil {
				t.Fatalf("parameter %s: no Default and no value given", name)
			}
			v = d.Value
		}
		s.lists[name] = strings.HasPrefix(scalar(get(p, "Type")), "CommaDelimitedList") || strings.HasPrefix(scalar(get(p, "Type")), "List<")
		if s.lists[name] {
			s.params[name] = strings.Split(v, ",")
		} else {
			s.params[name] = []string{v}
		}
	}
	for name := range overrides {
		if _, ok := s.params[name]; !ok {
			t.Fatalf("override %s: no such parameter", name)
		}
	}
	conds := get(tpl.doc, "Conditions")
	for i := 0; i+1 < len(conds.Content); i += 2 {
		s.condition(conds.Content[i].Value)
	}
	return s
}

// fn splits an intrinsic function into its name (Fn::Equals, Ref,
// Condition, …) and its arguments, from either form; "" for a node that
// is not one.
func fn(n *yaml.Node) (string, []*yaml.Node) {
	if n == nil {
		return "", nil
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		name := "Fn::" + n.Tag[1:]
		if n.Tag == "!Ref" || n.Tag == "!Condition" {
			name = n.Tag[1:]
		}
		if n.Kind == yaml.SequenceNode {
			return name, n.Content
		}
		return name, []*yaml.Node{{Kind: n.Kind, Value: n.Value, Content: n.Content, Tag: "!!str"}}
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k := n.Content[0].Value
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			v := n.Content[1]
			if v.Kind == yaml.SequenceNode {
				return k, v.Content
			}
			return k, []*yaml.Node{v}
		}
	}
	return "", nil
}

// condition evaluates the named condition once.
func (s *shape) condition(name string) bool {
	if v, ok := s.conds[name]; ok {
		return v
	}
	n := get(s.tpl.doc, "Conditions", name)
	if n == nil {
		s.t.Fatalf("condition %s: not in Conditions", name)
	}
	v := s.eval(n)
	s.conds[name] = v
	return v
}

// eval evaluates a condition (or a rule's assertion).
func (s *shape) eval(n *yaml.Node) bool {
	name, args := fn(n)
	switch name {
	case "Fn::Equals":
		if len(args) != 2 {
			s.t.Fatalf("line %d: Fn::Equals takes two arguments", n.Line)
		}
		return s.str(args[0]) == s.str(args[1])
	case "Fn::Not":
		return !s.eval(args[0])
	case "Fn::And":
		for _, a := range args {
			if !s.eval(a) {
				return false
			}
		}
		return true
	case "Fn::Or":
		return slices.ContainsFunc(args, s.eval)
	case "Condition":
		return s.condition(args[0].Value)
	case "Fn::EachMemberEquals":
		want := s.str(args[1])
		for _, v := range s.list(args[0]) {
			if v != want {
				return false
			}
		}
		return true
	}
	s.t.Fatalf("line %d: %q is not a condition function this test knows", n.Line, name)
	return false
}

// list is the value of a list: a Ref to a list parameter, or a sequence.
func (s *shape) list(n *yaml.Node) []string {
	if name, args := fn(n); name == "Ref" {
		if !s.lists[args[0].Value] {
			s.t.Fatalf("line %d: Ref %s is not a list parameter", n.Line, args[0].Value)
		}
		return s.params[args[0].Value]
	}
	if n.Kind != yaml.SequenceNode || n.Tag != "!!seq" {
		s.t.Fatalf("line %d: not a list", n.Line)
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, s.str(c))
	}
	return out
}

// str is the value of a string: a plain scalar, a Ref to a parameter, or
// a Fn::Join.
func (s *shape) str(n *yaml.Node) string {
	switch name, args := fn(n); name {
	case "":
		if n.Kind != yaml.ScalarNode {
			s.t.Fatalf("line %d: not a string", n.Line)
		}
		return n.Value
	case "Ref":
		v, ok := s.params[args[0].Value]
		if !ok || s.lists[args[0].Value] {
			s.t.Fatalf("line %d: Ref %s is not a string parameter", n.Line, args[0].Value)
		}
		return v[0]
	case "Fn::Join":
		return strings.Join(s.list(args[1]), s.str(args[0]))
	case "Fn::FindInMap":
		v := get(s.tpl.doc, "Mappings", s.str(args[0]), s.str(args[1]), s.str(args[2]))
		if v == nil || v.Kind != yaml.ScalarNode {
			s.t.Fatalf("line %d: Fn::FindInMap %s.%s.%s: no such value", n.Line, s.str(args[0]), s.str(args[1]), s.str(args[2]))
		}
		return v.Value
	default:
		s.t.Fatalf("line %d: %s in a condition: not known to this test", n.Line, name)
		return ""
	}
}

// refused returns the AssertDescription of every rule assertion this
// parameter set breaks.
func (s *shape) refused() []string {
	var out []string
	rules := get(s.tpl.doc, "Rules")
	for i := 0; rules != nil && i+1 < len(rules.Content); i += 2 {
		r := rules.Content[i+1]
		if c := get(r, "RuleCondition"); c != nil && !s.eval(c) {
			continue
		}
		for _, a := range get(r, "Assertions").Content {
			if !s.eval(get(a, "Assert")) {
				out = append(out, rules.Content[i].Value+": "+scalar(get(a, "AssertDescription")))
			}
		}
	}
	return out
}

// resolve returns a copy of n with every Fn::If replaced by the branch its
// condition picks, and AWS::NoValue (and what holds only it) dropped: nil.
func (s *shape) resolve(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	name, args := fn(n)
	switch {
	case name == "Fn::If":
		if len(args) != 3 {
			s.t.Fatalf("line %d: Fn::If takes three arguments", n.Line)
		}
		if s.condition(args[0].Value) {
			return s.resolve(args[1])
		}
		return s.resolve(args[2])
	case name == "Ref" && args[0].Value == "AWS::NoValue":
		return nil
	}
	c := *n
	c.Content = nil
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := s.resolve(n.Content[i+1]); v != nil {
				c.Content = append(c.Content, n.Content[i], v)
			}
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, e := range n.Content {
			if v := s.resolve(e); v != nil {
				c.Content = append(c.Content, v)
			}
		}
	}
	return &c
}

// canon writes a resolved value short and comparable: Ref:X, GetAtt:X.Y,
// a plain scalar as it is, a list as [a b].
func canon(n *yaml.Node) string {
	if n == nil {
		return "<none>"
	}
	if r := ref(n); r != "" {
		return "Ref:" + r
	}
	if g := getAtt(n); g != "" {
		return "GetAtt:" + g
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag + n.Value
	case yaml.SequenceNode:
		var parts []string
		for _, c := range n.Content {
			parts = append(parts, canon(c))
		}
		return n.Tag + "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("<%s at line %d>", n.Tag, n.Line)
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// refs collects the logical IDs a resolved node names: Ref, Fn::GetAtt,
// ${X} and ${X.Attr} in Fn::Sub (its own variables left out), and
// SAM's Ref of X.Version; not pseudo parameters, and not what
// Fn::Transform brings in.
func refs(n *yaml.Node, out map[string]bool) {
	if n == nil {
		return
	}
	name, args := fn(n)
	switch name {
	case "Ref":
		if id, _, _ := strings.Cut(args[0].Value, "."); !strings.HasPrefix(id, "AWS::") {
			out[id] = true
		}
		return
	case "Fn::GetAtt":
		id, _, _ := strings.Cut(args[0].Value, ".")
		out[id] = true
		return
	case "Fn::Sub":
		local := map[string]bool{}
		if len(args) == 2 {
			for i := 0; i+1 < len(args[1].Content); i += 2 {
				local[args[1].Content[i].Value] = true
			}
			refs(args[1], out)
		}
		for _, m := range subVar.FindAllStringSubmatch(args[0].Value, -1) {
			id, _, _ := strings.Cut(m[1], ".")
			if !strings.HasPrefix(id, "AWS::") && !local[id] {
				out[id] = true
			}
		}
		return
	case "Fn::Transform":
		return
	}
	for _, c := range n.Content {
		refs(c, out)
	}
}

// resources returns the logical IDs of the resources this shape creates,
// with their resolved nodes.
func (s *shape) resources() map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	res := get(s.tpl.doc, "Resources")
	for i := 0; i+1 < len(res.Content); i += 2 {
		r := res.Content[i+1]
		if c := scalar(get(r, "Condition")); c != "" && !s.condition(c) {
			continue
		}
		out[res.Content[i].Value] = s.resolve(r)
	}
	return out
}

// ofType returns the IDs of the created resources of type typ, sorted.
func (s *shape) ofType(typ string) []string {
	var ids []string
	for id, r := range s.resources() {
		if scalar(get(r, "Type")) == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// env is a Globals environment variable of the functions, resolved.
func (s *shape) env(name string) string {
	return canon(s.resolve(get(s.tpl.doc, "Globals", "Function", "Environment", "Variables", name)))
}

// checkRefs fails for every reference, in what this shape creates (the
// functions' Globals and the outputs included), to a resource it does
// not create or to a parameter that does not exist: what CloudFormation
// would refuse for this parameter set.
func (s *shape) checkRefs() {
	s.t.Helper()
	created := s.resources()
	check := func(where string, n *yaml.Node) {
		found := map[string]bool{}
		refs(n, found)
		if d := get(n, "DependsOn"); d != nil {
			for _, id := range append(seq(d), scalar(d)) {
				found[id] = id != ""
			}
		}
		for id, ok := range found {
			if !ok {
				continue
			}
			if _, isParam := s.params[id]; created[id] == nil && !isParam {
				s.t.Errorf("%s names %s, which this shape does not create", where, id)
			}
		}
	}
	for id, r := range created {
		check("resource "+id, r)
	}
	check("Globals", s.resolve(get(s.tpl.doc, "Globals")))
	outs := get(s.tpl.doc, "Outputs")
	for i := 0; i+1 < len(outs.Content); i += 2 {
		o := outs.Content[i+1]
		if c := scalar(get(o, "Condition")); c != "" && !s.condition(c) {
			continue
		}
		check("output "+outs.Content[i].Value, s.resolve(o))
	}
}
