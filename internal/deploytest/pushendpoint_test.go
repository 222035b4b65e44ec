package deploytest

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// dependencies returns every resource id reaches through DependsOn and
// references (Metadata's included), transitively, in shape s.
func dependencies(s *shape, id string) map[string]bool {
	created := s.resources()
	seen := map[string]bool{}
	var walk func(string)
	walk = func(id string) {
		r := created[id]
		if r == nil {
			return
		}
		found := map[string]bool{}
		refs(r, found)
		if d := get(r, "DependsOn"); d != nil {
			for _, dep := range append(seq(d), scalar(d)) {
				found[dep] = dep != ""
			}
		}
		for dep, ok := range found {
			if ok && !seen[dep] && created[dep] != nil {
				seen[dep] = true
				walk(dep)
			}
		}
	}
	walk(id)
	return seen
}

// pushHost is where shape s's IoT data endpoint's host name comes from:
// the parameter's value, the look-up's "GetAtt:PushEndpointLookup.Address",
// or "" for no push.
func pushHost(s *shape) string {
	return hostOf(s, s.resolve(get(s.tpl.doc, "Globals", "Function", "Environment", "Variables", "PUSH_ENDPOINT")))
}

// hostOf is a resolved value as pushHost says it, a Ref to PushEndpoint
// replaced by its value.
func hostOf(s *shape, n *yaml.Node) string {
	if ref(n) == "PushEndpoint" {
		return s.params["PushEndpoint"][0]
	}
	return strings.TrimPrefix(canon(n), "!!str")
}

// TestPushEndpoint holds PushEndpoint's three meanings to the template,
// per shape: "discover" (the default) creates the look-up custom resource
// and its function (outside the network, its own role with only
// iot:DescribeEndpoint beside its logs) and every use of the endpoint's
// name (PUSH_ENDPOINT, the relay's, the PushUrl output) is the look-up's
// Address; a host name is used as given, and nothing is looked up; "off"
// (or empty, what stacks deployed before discovery hold) creates no push
// at all: no look-up, no hint table, no relay, no PutItem permission, no
// PUSH_ENDPOINT. With push in the stack's own network, the upload
// function waits for the DynamoDB gateway endpoint.
func TestPushEndpoint(t *testing.T) {
	tpl := loadTemplate(t)
	const host = "a1b2c3d4e5f6g7-ats.iot.eu-west-1.amazonaws.com"
	beside := map[string]string{"SubnetIds": "subnet-1,subnet-2", "SecurityGroupIds": "sg-1",
		"DatabaseSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"}
	cases := []struct {
		name      string
		overrides map[string]string
		want      string // pushHost
		network   bool   // the stack's own network (the DynamoDB gateway endpoint)
	}{
		{"FromZero", nil, "GetAtt:PushEndpointLookup.Address", true},
		{"Explicit", map[string]string{"PushEndpoint": host}, host, true},
		{"Off", map[string]string{"PushEndpoint": "off"}, "", true},
		{"Empty", map[string]string{"PushEndpoint": ""}, "", true},
		{"BesideThePlatform", beside, "GetAtt:PushEndpointLookup.Address", false},
		{"BesideThePlatformExplicit", with(beside, "PushEndpoint", host), host, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newShape(t, tpl, c.overrides)
			if r := s.refused(); len(r) > 0 {
				t.Fatalf("refused: %v", r)
			}
			s.checkRefs()
			created := s.resources()
			discover, push := strings.HasPrefix(c.want, "GetAtt:"), c.want != ""
			if got := pushHost(s); got != c.want {
				t.Errorf("PUSH_ENDPOINT: got %q, want %q", got, c.want)
			}
			if got := s.env("PUSH_AUTHORIZER") != "!!str"; got != push {
				t.Errorf("PUSH_AUTHORIZER set: got %v, want %v", got, push)
			}
			if got := s.ofType("Custom::IotEndpoint"); discover != slices.Equal(got, []string{"PushEndpointLookup"}) || !discover && len(got) > 0 {
				t.Errorf("Custom::IotEndpoint resources: got %v, want PushEndpointLookup only when discovering", got)
			}
			if _, ok := created["Iotendpoint"]; ok != discover {
				t.Errorf("the Iotendpoint function created: %v, want %v", ok, discover)
			}
			if discover {
				checkLookup(t, s)
			}
			checkPushNetwork(t, s, push && c.network)
			checkPushUrl(t, s, c.want)
			if got := len(actionsIn(created["Upload"], "dynamodb:PutItem")) > 0; got != push {
				t.Errorf("Upload may dynamodb:PutItem: %v, want %v", got, push)
			}
			if _, got := created["Pushrelay"]; got != push {
				t.Errorf("the Pushrelay function created: %v, want %v", got, push)
			}
			if _, got := created["PushHints"]; got != push {
				t.Errorf("the PushHints table created: %v, want %v", got, push)
			}
			if push && hostOf(s, s.resolve(get(s.resolve(get(created["Pushrelay"], "Properties", "Environment")), "Variables", "PUSH_ENDPOINT"))) != c.want {
				t.Errorf("Pushrelay's PUSH_ENDPOINT: want %s", c.want)
			}
		})
	}
}

// with returns m with k set to v (m unchanged).
func with(m map[string]string, k, v string) map[string]string {
	c := maps.Clone(m)
	c[k] = v
	return c
}

// checkLookup: PushEndpointLookup runs the Iotendpoint function for
// iot:Data-ATS; the function runs outside any VPC, with none of the
// Globals' environment, under its own role, which may describe the
// endpoint and write its own log group, and nothing else.
func checkLookup(t *testing.T, s *shape) {
	t.Helper()
	created := s.resources()
	p := get(created["PushEndpointLookup"], "Properties")
	if getAtt(get(p, "ServiceToken")) != "Iotendpoint.Arn" || scalar(get(p, "EndpointType")) != "iot:Data-ATS" {
		t.Errorf("PushEndpointLookup: want ServiceToken !GetAtt Iotendpoint.Arn and EndpointType iot:Data-ATS")
	}
	fp := get(created["Iotendpoint"], "Properties")
	for _, k := range []string{"VpcConfig", "Environment", "Policies"} {
		if v := get(fp, k); v != nil {
			t.Errorf("Iotendpoint.%s: got %s, want none (no network, no Globals environment, its own role)", k, canon(v))
		}
	}
	if scalar(get(fp, "Tracing")) != "Disabled" {
		t.Errorf("Iotendpoint.Tracing: got %q, want Disabled (no X-Ray permissions)", scalar(get(fp, "Tracing")))
	}
	role := getAtt(get(fp, "Role"))
	roleID, _, _ := strings.Cut(role, ".")
	r := created[roleID]
	if r == nil || scalar(get(r, "Type")) != "AWS::IAM::Role" || get(r, "Properties", "ManagedPolicyArns") != nil {
		t.Fatalf("Iotendpoint.Role: got %q, want a role of its own without managed policies", role)
	}
	granted := map[string]string{}
	for _, pol := range get(r, "Properties", "Policies").Content {
		for _, st := range get(pol, "PolicyDocument", "Statement").Content {
			res := canon(get(st, "Resource"))
			for _, a := range append(seq(get(st, "Action")), scalar(get(st, "Action"))) {
				if a != "" {
					granted[a] = res
				}
			}
		}
	}
	want := map[string]string{"iot:DescribeEndpoint": "!!str*",
		"logs:CreateLogStream": "GetAtt:IotendpointLogs.Arn", "logs:PutLogEvents": "GetAtt:IotendpointLogs.Arn"}
	if !maps.Equal(granted, want) {
		t.Errorf("Iotendpoint's role grants %v, want exactly %v", granted, want)
	}
	if lg := ref(get(fp, "LoggingConfig", "LogGroup")); lg != "IotendpointLogs" {
		t.Errorf("Iotendpoint's log group: got %q, want IotendpointLogs", lg)
	}
}

// checkPushNetwork: with push in the stack's own network, one DynamoDB
// gateway endpoint on the private subnets' route table (free), whose
// policy allows dynamodb:PutItem on the hint table alone, and the upload
// function waits for it; otherwise none. Never an IoT data endpoint
// (PrivateLink, billed by the hour) nor a private hosted zone: the relay
// publishes from outside the network.
func checkPushNetwork(t *testing.T, s *shape, want bool) {
	t.Helper()
	created := s.resources()
	var iot, ddb []string
	for _, id := range s.ofType("AWS::EC2::VPCEndpoint") {
		switch svc := get(created[id], "Properties", "ServiceName").Value; {
		case strings.HasSuffix(svc, ".iot.data"):
			iot = append(iot, id)
		case strings.HasSuffix(svc, ".dynamodb"):
			ddb = append(ddb, id)
		}
	}
	if zones := s.ofType("AWS::Route53::HostedZone"); len(iot)+len(zones)+len(s.ofType("AWS::Route53::RecordSet")) > 0 {
		t.Errorf("IoT data endpoints %v, hosted zones %v: want none (the relay publishes from outside the network)", iot, zones)
	}
	if !want {
		if len(ddb) > 0 {
			t.Errorf("DynamoDB endpoints %v: want none", ddb)
		}
		return
	}
	if len(ddb) != 1 {
		t.Fatalf("DynamoDB endpoints %v: want one", ddb)
	}
	p := get(created[ddb[0]], "Properties")
	rts := get(p, "RouteTableIds")
	if scalar(get(p, "VpcEndpointType")) != "Gateway" || rts == nil || len(rts.Content) != 1 || ref(rts.Content[0]) != "PrivateRouteTable" {
		t.Errorf("%s: want a Gateway endpoint on PrivateRouteTable", ddb[0])
	}
	st := get(p, "PolicyDocument", "Statement")
	if st == nil || len(st.Content) != 1 || scalar(get(st.Content[0], "Action")) != "dynamodb:PutItem" ||
		getAtt(get(st.Content[0], "Resource")) != "PushHints.Arn" || scalar(get(st.Content[0], "Effect")) != "Allow" {
		t.Errorf("%s's policy: want one statement allowing dynamodb:PutItem on !GetAtt PushHints.Arn", ddb[0])
	}
	if !dependencies(s, "Upload")[ddb[0]] {
		t.Errorf("Upload does not wait for %s: its first hints may go nowhere", ddb[0])
	}
}

// checkPushUrl: the PushUrl output exists with push only, and names host.
func checkPushUrl(t *testing.T, s *shape, host string) {
	t.Helper()
	o := get(s.tpl.doc, "Outputs", "PushUrl")
	on := o != nil && s.condition(scalar(get(o, "Condition")))
	if on != (host != "") {
		t.Fatalf("output PushUrl: present %v, want %v", on, host != "")
	}
	if !on {
		return
	}
	_, args := fn(s.resolve(get(o, "Value")))
	if len(args) != 2 || !strings.HasPrefix(args[0].Value, "wss://${Host}/mqtt?x-amz-customauthorizer-name=") {
		t.Fatalf("output PushUrl: want !Sub [wss://${Host}/mqtt?x-amz-customauthorizer-name=…, {Host: …}]")
	}
	if got := hostOf(s, get(args[1], "Host")); got != host {
		t.Errorf("output PushUrl's host: got %s, want %s", got, host)
	}
}

// TestPushEndpointValues: the parameter takes discover, off, empty and an
// IoT data endpoint's host name, and nothing else.
func TestPushEndpointValues(t *testing.T) {
	tpl := loadTemplate(t)
	p := get(tpl.doc, "Parameters", "PushEndpoint")
	if scalar(get(p, "Default")) != "discover" {
		t.Errorf("PushEndpoint's default: got %q, want discover (push on from zero)", scalar(get(p, "Default")))
	}
	re := regexp.MustCompile(scalar(get(p, "AllowedPattern")))
	for v, want := range map[string]bool{
		"discover": true, "off": true, "": true, "a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com": true,
		"a1b2-ats.iot.cn-north-1.amazonaws.com.cn": true, "Discover": false, "auto": false, "none": false,
		"example.com": false, "wss://a1b2-ats.iot.us-east-1.amazonaws.com/mqtt": false,
	} {
		if re.MatchString(v) != want {
			t.Errorf("PushEndpoint %q allowed: got %v, want %v", v, !want, want)
		}
	}
}
