package deploytest

import (
	"maps"
	"slices"
	"strconv"
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
		if stmts := actionsIn(get(fn.node, "Properties", "Policies"), "iot:Publish"); len(stmts) > 0 {
			t.Errorf("%s may iot:Publish; only Pushrelay (its own role, on the hint table's stream) publishes hints", id)
		}
	}
	for _, id := range resourcesOfType(tpl, "AWS::IAM::Role") {
		stmts := actionsIn(res(id), "iot:Publish")
		if id != "PushrelayRole" {
			if len(stmts) > 0 {
				t.Errorf("%s may iot:Publish; only PushrelayRole may", id)
			}
			continue
		}
		if len(stmts) != 1 {
			t.Fatalf("PushrelayRole: %d iot:Publish statements, want one", len(stmts))
		}
		r := get(stmts[0], "Resource")
		if r == nil || r.Tag != "!Sub" || !strings.HasSuffix(r.Value, wantTopic) {
			got := "nothing"
			if r != nil {
				got = r.Tag + " " + r.Value
			}
			t.Errorf("PushrelayRole's iot:Publish on %s, want a !Sub ARN ending in %s", got, wantTopic)
		}
	}
	checkHintTable(t, tpl)
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

// checkHintTable: the hint table is on demand, with a TTL on
// push.AttrExpires and a stream of new images keyed by push.AttrID; the
// upload function alone may touch DynamoDB, with dynamodb:PutItem on that
// table only, and is told its name (PUSH_HINT_TABLE); the relay reads its
// stream (the one event it has: StartingPosition LATEST, no batching
// window, bounded retries and age, a failing batch bisected, and the
// failed record reported, so one bad record cannot block the shard), runs
// outside the network with PUSH_ENDPOINT alone, under a role of its own
// that may publish on the hint topics, read that table's stream and
// write its log group, and nothing else.
func checkHintTable(t *testing.T, tpl template) {
	t.Helper()
	tables := resourcesOfType(tpl, "AWS::DynamoDB::Table")
	if len(tables) != 1 || tables[0] != "PushHints" {
		t.Fatalf("DynamoDB tables: got %v, want PushHints alone", tables)
	}
	p := get(tpl.doc, "Resources", "PushHints", "Properties")
	if scalar(get(p, "BillingMode")) != "PAY_PER_REQUEST" || scalar(get(p, "TimeToLiveSpecification", "AttributeName")) != push.AttrExpires ||
		get(p, "TimeToLiveSpecification", "Enabled").Value != "true" || scalar(get(p, "StreamSpecification", "StreamViewType")) != "NEW_IMAGE" ||
		scalar(get(get(p, "KeySchema").Content[0], "AttributeName")) != push.AttrID {
		t.Errorf("PushHints: want on demand, TTL on %s, a NEW_IMAGE stream, keyed by %s", push.AttrExpires, push.AttrID)
	}
	for id, fn := range tpl.functions {
		out, _ := yaml.Marshal(get(fn.node, "Properties", "Policies"))
		writes := actionsIn(get(fn.node, "Properties", "Policies"), "dynamodb:PutItem")
		if id != "Upload" {
			if strings.Contains(string(out), "dynamodb:") || strings.Contains(string(out), "DynamoDB") {
				t.Errorf("%s has DynamoDB rights; only Upload writes hints (the relay's stream reads are its event's)", id)
			}
			continue
		}
		if len(writes) != 1 || getAtt(get(writes[0], "Resource")) != "PushHints.Arn" || scalar(get(writes[0], "Action")) != "dynamodb:PutItem" ||
			strings.Count(string(out), "dynamodb:") != 1 {
			t.Errorf("Upload's DynamoDB rights: want one statement, dynamodb:PutItem on !GetAtt PushHints.Arn, got:\n%s", out)
		}
		env := get(fn.node, "Properties", "Environment", "Variables", "PUSH_HINT_TABLE")
		if env == nil || env.Tag != "!If" || len(env.Content) != 3 || ref(env.Content[1]) != "PushHints" {
			t.Errorf("Upload's PUSH_HINT_TABLE: want !If [HasPush, !Ref PushHints, \"\"]")
		}
	}
	for _, typ := range []string{"AWS::IAM::Role", "AWS::IAM::ManagedPolicy"} {
		for _, id := range resourcesOfType(tpl, typ) {
			out, _ := yaml.Marshal(get(tpl.doc, "Resources", id))
			if id != "PushrelayRole" && strings.Contains(string(out), "dynamodb:") {
				t.Errorf("%s grants DynamoDB rights; only Upload's policy and PushrelayRole may", id)
			}
		}
	}
	relay := get(tpl.functions["Pushrelay"].node, "Properties")
	if ref(get(relay, "VpcConfig")) != "AWS::NoValue" {
		t.Errorf("Pushrelay.VpcConfig: want !Ref AWS::NoValue (outside the network: it reaches IoT Core over Lambda's own access)")
	}
	if getAtt(get(relay, "Role")) != "PushrelayRole.Arn" || get(relay, "Policies") != nil || scalar(get(relay, "Tracing")) != "Disabled" {
		t.Errorf("Pushrelay: want Role !GetAtt PushrelayRole.Arn, no Policies, Tracing Disabled (no X-Ray rights)")
	}
	role := get(tpl.doc, "Resources", "PushrelayRole", "Properties")
	if get(role, "ManagedPolicyArns") != nil {
		t.Errorf("PushrelayRole: managed policies %s, want none", canon(get(role, "ManagedPolicyArns")))
	}
	granted := map[string]string{}
	for _, pol := range get(role, "Policies").Content {
		for _, st := range get(pol, "PolicyDocument", "Statement").Content {
			r := get(st, "Resource")
			where := r.Tag + " " + r.Value
			if r.Tag == "!GetAtt" {
				where = "GetAtt:" + r.Value
			}
			for _, a := range append(seq(get(st, "Action")), scalar(get(st, "Action"))) {
				if a != "" {
					granted[a] = where
				}
			}
		}
	}
	stream := "!Sub ${PushHints.Arn}/stream/*"
	want := map[string]string{
		"iot:Publish":             "!Sub arn:${AWS::Partition}:iot:${AWS::Region}:${AWS::AccountId}:topic/pendinguploads/*/uploads",
		"dynamodb:DescribeStream": stream, "dynamodb:GetRecords": stream, "dynamodb:GetShardIterator": stream, "dynamodb:ListStreams": stream,
		"logs:CreateLogStream": "GetAtt:PushrelayLogs.Arn", "logs:PutLogEvents": "GetAtt:PushrelayLogs.Arn",
	}
	if !maps.Equal(granted, want) {
		t.Errorf("PushrelayRole grants %v, want exactly %v", granted, want)
	}
	e := get(relay, "Environment")
	if e == nil || e.Tag != "!If" || len(e.Content) != 3 {
		t.Errorf("Pushrelay.Environment: want an !If (an intrinsic replaces the Globals' environment)")
	} else {
		for _, branch := range e.Content[1:] {
			if v := get(branch, "Variables"); v == nil || len(v.Content) != 2 || v.Content[0].Value != "PUSH_ENDPOINT" {
				t.Errorf("Pushrelay.Environment: each branch's Variables: want PUSH_ENDPOINT alone (line %d)", branch.Line)
			}
		}
	}
	events := get(relay, "Events")
	if events == nil || len(events.Content) != 2 {
		t.Fatalf("Pushrelay.Events: want one, the hint table's stream")
	}
	ev := events.Content[1]
	ep := get(ev, "Properties")
	retries, _ := strconv.Atoi(scalar(get(ep, "MaximumRetryAttempts")))
	age, _ := strconv.Atoi(scalar(get(ep, "MaximumRecordAgeInSeconds")))
	batch, _ := strconv.Atoi(scalar(get(ep, "BatchSize")))
	if scalar(get(ev, "Type")) != "DynamoDB" || getAtt(get(ep, "Stream")) != "PushHints.StreamArn" ||
		scalar(get(ep, "StartingPosition")) != "LATEST" || scalar(get(ep, "MaximumBatchingWindowInSeconds")) != "0" ||
		retries < 0 || retries > 10 || age < 60 || age > 300 || batch < 1 || batch > 100 ||
		get(ep, "BisectBatchOnFunctionError").Value != "true" || !slices.Equal(seq(get(ep, "FunctionResponseTypes")), []string{"ReportBatchItemFailures"}) {
		t.Errorf("Pushrelay's event (line %d): want the PushHints stream, LATEST, a small batch, no window, 0..10 retries, 60..300 s of age, bisect, ReportBatchItemFailures", ev.Line)
	}
}
