package deploytest

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/push"
)

// resourcesOfType returns the logical IDs of template.yaml's resources of typ.
func resourcesOfType(tpl template, typ string) []string {
	var ids []string
	res := get(tpl.doc, "Resources")
	for i := 0; i+1 < len(res.Content); i += 2 {
		if scalar(get(res.Content[i+1], "Type")) == typ {
			ids = append(ids, res.Content[i].Value)
		}
	}
	return ids
}

// actionsIn walks n and returns every IAM statement (a mapping with an
// Action) whose actions include action, with its resources as written.
func actionsIn(n *yaml.Node, action string) []*yaml.Node {
	if n == nil {
		return nil
	}
	var found []*yaml.Node
	if n.Kind == yaml.MappingNode {
		if a := get(n, "Action"); a != nil {
			if a.Value == action {
				found = append(found, n)
			}
			for _, c := range a.Content {
				if c.Value == action {
					found = append(found, n)
				}
			}
		}
	}
	for _, c := range n.Content {
		found = append(found, actionsIn(c, action)...)
	}
	return found
}

// TestPushTemplate holds the push pieces of template.yaml to each other
// and to internal/push: the authorizer runs the Pushauth function, which
// nothing but IoT Core (for that authorizer) may invoke and no event
// reaches; the name the functions announce (PUSH_AUTHORIZER) is the
// authorizer's; only the upload function may publish, on the hint topics
// only (push.TopicTemplate with any workspace); the poll URL is the list
// function's, public through both permissions.
func TestPushTemplate(t *testing.T) {
	tpl := loadTemplate(t)
	res := func(id string) *yaml.Node { return get(tpl.doc, "Resources", id) }

	auths := resourcesOfType(tpl, "AWS::IoT::Authorizer")
	if len(auths) != 1 {
		t.Fatalf("AWS::IoT::Authorizer resources: got %v, want one", auths)
	}
	a := res(auths[0])
	if getAtt(get(a, "Properties", "AuthorizerFunctionArn")) != "Pushauth.Arn" ||
		get(a, "Properties", "SigningDisabled").Value != "true" || scalar(get(a, "Properties", "Status")) != "ACTIVE" {
		t.Errorf("%s: want AuthorizerFunctionArn !GetAtt Pushauth.Arn, SigningDisabled true, Status ACTIVE", auths[0])
	}
	name := get(a, "Properties", "AuthorizerName")
	announced := get(tpl.doc, "Globals", "Function", "Environment", "Variables", "PUSH_AUTHORIZER")
	if name == nil || name.Tag != "!Sub" || announced == nil || len(announced.Content) != 3 ||
		announced.Content[1].Tag != "!Sub" || announced.Content[1].Value != name.Value {
		t.Error("PUSH_AUTHORIZER must be !If [HasPush, the authorizer's own AuthorizerName (the same !Sub), \"\"]")
	}
	if get(tpl.functions["Pushauth"].node, "Properties", "Events") != nil {
		t.Error("Pushauth has Events; only IoT Core may reach it")
	}

	var invokers []string
	for _, id := range resourcesOfType(tpl, "AWS::Lambda::Permission") {
		p := get(res(id), "Properties")
		if getAtt(get(p, "FunctionName")) != "Pushauth.Arn" {
			continue
		}
		invokers = append(invokers, id)
		if scalar(get(p, "Principal")) != "iot.amazonaws.com" || scalar(get(p, "Action")) != "lambda:InvokeFunction" ||
			getAtt(get(p, "SourceArn")) != auths[0]+".Arn" {
			t.Errorf("%s: want lambda:InvokeFunction by iot.amazonaws.com for %s.Arn only", id, auths[0])
		}
	}
	if len(invokers) != 1 {
		t.Errorf("permissions to invoke Pushauth: got %v, want one", invokers)
	}

	wantTopic := ":topic/" + strings.Replace(push.TopicTemplate, "{workspace_id}", "*", 1)
	for id, fn := range tpl.functions {
		stmts := actionsIn(get(fn.node, "Properties", "Policies"), "iot:Publish")
		if id != "Upload" {
			if len(stmts) > 0 {
				t.Errorf("%s may iot:Publish; only Upload (stage and commit) publishes hints", id)
			}
			continue
		}
		if len(stmts) != 1 {
			t.Fatalf("Upload: %d iot:Publish statements, want one", len(stmts))
		}
		r := get(stmts[0], "Resource")
		if r == nil || r.Tag != "!Sub" || !strings.HasSuffix(r.Value, wantTopic) {
			got := "nothing"
			if r != nil {
				got = r.Tag + " " + r.Value
			}
			t.Errorf("Upload's iot:Publish on %s, want a !Sub ARN ending in %s", got, wantTopic)
		}
	}
	for _, action := range []string{"iot:Subscribe", "iot:Receive", "iot:Connect", "iot:*"} {
		if n := actionsIn(get(tpl.doc, "Resources"), action); len(n) > 0 {
			t.Errorf("the template grants %s; only the authorizer's policy does, per connection", action)
		}
	}

	urls := resourcesOfType(tpl, "AWS::Lambda::Url")
	if len(urls) != 1 || getAtt(get(res(urls[0]), "Properties", "TargetFunctionArn")) != "List.Arn" ||
		scalar(get(res(urls[0]), "Properties", "AuthType")) != "NONE" {
		t.Fatalf("function URLs %v: want one, the list function's, AuthType NONE (it checks the bearer itself)", urls)
	}
	granted := map[string]bool{}
	for _, id := range resourcesOfType(tpl, "AWS::Lambda::Permission") {
		p := get(res(id), "Properties")
		if getAtt(get(p, "FunctionName")) == "List.Arn" && scalar(get(p, "Principal")) == "*" {
			granted[scalar(get(p, "Action"))] = true
		}
	}
	if !granted["lambda:InvokeFunctionUrl"] || !granted["lambda:InvokeFunction"] {
		t.Errorf("the poll URL's public permissions: got %v, want lambda:InvokeFunctionUrl and lambda:InvokeFunction", granted)
	}
}
