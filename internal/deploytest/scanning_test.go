package deploytest

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTranslatedMalwareScanning holds the translated template (the SAM
// transform, conditions evaluated) to docs/scanning.md: only the shape
// with MalwareScanning guardduty has a GuardDuty Malware Protection plan
// (on the bucket's objects/ prefix alone, with its role, which GuardDuty
// assumes and which reads objects/ only), the EventBridge rule on the
// scan result event of this bucket, and the Scanresult function, whose
// role may delete objects/ and nothing else of S3; every function then
// runs with MALWARE_SCAN guardduty. The other shapes have none of them,
// and their functions MALWARE_SCAN off.
func TestTranslatedMalwareScanning(t *testing.T) {
	forEachShape(t, func(t *testing.T, s *shape) {
		scanned := s.params["MalwareScanning"][0] == "guardduty"
		plans, rules := s.ofType("AWS::GuardDuty::MalwareProtectionPlan"), scanRules(s)
		_, fn := s.resources()["Scanresult"]
		if !scanned {
			if len(plans) > 0 || len(rules) > 0 || fn {
				t.Fatalf("MalwareScanning off: plans %v, scan result rules %v, Scanresult function %v; want none", plans, rules, fn)
			}
			if got := fnEnv(s, "Upload", "MALWARE_SCAN"); got != "off" {
				t.Errorf("MALWARE_SCAN: got %s, want off", got)
			}
			return
		}
		if len(plans) != 1 || len(rules) != 1 || !fn {
			t.Fatalf("MalwareScanning guardduty: plans %v, scan result rules %v, Scanresult function %v; want one of each", plans, rules, fn)
		}
		if got := fnEnv(s, "Upload", "MALWARE_SCAN"); got != "guardduty" {
			t.Errorf("MALWARE_SCAN: got %s, want guardduty", got)
		}
		plan := s.resources()[plans[0]]
		bucket := get(plan, "Properties", "ProtectedResource", "S3Bucket")
		if b, p := ref(get(bucket, "BucketName")), list(get(bucket, "ObjectPrefixes")); b != "ContentBucket" || !slices.Equal(p, []string{"objects/"}) {
			t.Errorf("the plan protects %s %v, want ContentBucket's objects/ alone (not staging/, not orphans/)", b, p)
		}
		role := refOrAtt(get(plan, "Properties", "Role"))
		trust := dump(get(s.resources()[role], "Properties", "AssumeRolePolicyDocument"))
		if !strings.Contains(trust, "malware-protection-plan.guardduty.amazonaws.com") {
			t.Errorf("the plan's role %s trusts %s, want GuardDuty's malware protection plan service", role, trust)
		}
		for _, st := range statements(s.resources()[role]) {
			res := dump(get(st, "Resource"))
			for _, a := range list(get(st, "Action")) {
				if a == "s3:GetObject" && !strings.Contains(res, "/objects/*") {
					t.Errorf("the plan's role reads %s, want objects/ alone", res)
				}
			}
		}
		rule := s.resources()[rules[0]]
		pattern := dump(get(rule, "Properties", "EventPattern"))
		for _, want := range []string{"aws.guardduty", "GuardDuty Malware Protection Object Scan Result", `{"Ref": "ContentBucket"}`} {
			if !strings.Contains(pattern, want) {
				t.Errorf("the rule's pattern %s lacks %s", pattern, want)
			}
		}
		if target := dump(get(rule, "Properties", "Targets")); !strings.Contains(target, "Scanresult") {
			t.Errorf("the rule's targets %s, want the Scanresult function", target)
		}
		// The function's own role: S3 is one action on objects/.
		fnRole := refOrAtt(get(s.resources()["Scanresult"], "Properties", "Role"))
		var s3 []string
		for _, st := range statements(s.resources()[fnRole]) {
			for _, a := range list(get(st, "Action")) {
				if strings.HasPrefix(a, "s3:") {
					s3 = append(s3, a+" "+strings.TrimSpace(dump(get(st, "Resource"))))
				}
			}
		}
		if want := []string{`s3:DeleteObject {"Fn::Sub": "${ContentBucket.Arn}/objects/*"}`}; !slices.Equal(s3, want) {
			t.Errorf("Scanresult's S3 rights: got %v, want %v", s3, want)
		}
	})
}

// scanRules are the EventBridge rules of s on GuardDuty's scan results.
func scanRules(s *shape) []string {
	var out []string
	for _, id := range s.ofType("AWS::Events::Rule") {
		if strings.Contains(dump(get(s.resources()[id], "Properties", "EventPattern")), "aws.guardduty") {
			out = append(out, id)
		}
	}
	return out
}

// refOrAtt is the resource a Ref or Fn::GetAtt names.
func refOrAtt(n *yaml.Node) string {
	if r := ref(n); r != "" {
		return r
	}
	return strings.SplitN(getAtt(n), ".", 2)[0]
}

// dump is n as YAML, flow style, for reading and matching.
func dump(n *yaml.Node) string {
	if n == nil {
		return "<none>"
	}
	out, _ := yaml.Marshal(n)
	return string(out)
}

// fnEnv is the value of a function's environment variable name, resolved.
func fnEnv(s *shape, fn, name string) string {
	v := get(s.resources()[fn], "Properties", "Environment", "Variables", name)
	if r := ref(v); r != "" && s.params[r] != nil {
		return s.params[r][0]
	}
	return canon(s.resolve(v))
}

// statements are every policy statement of a role's inline policies.
func statements(role *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	policies := get(role, "Properties", "Policies")
	for i := 0; policies != nil && i < len(policies.Content); i++ {
		if sts := get(policies.Content[i], "PolicyDocument", "Statement"); sts != nil {
			out = append(out, sts.Content...)
		}
	}
	return out
}

// list is a scalar or a sequence of scalars, as strings.
func list(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}
