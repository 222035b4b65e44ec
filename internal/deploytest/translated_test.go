package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
)

// The shapes the translated-template tests hold, each a parameter set
// (what is not given takes its default).
var translatedShapes = map[string]map[string]string{
	// Every default: the stack's own network and database.
	"FromZero": {},
	// An existing network and database (docs/deploy.md).
	"BesideThePlatform": besideThePlatform,
	// The stack's own database behind an RDS Proxy, with push on, in the
	// zones given (where IoT Core's data endpoint is), and every alarm,
	// the dashboard and every metric (Monitoring=full): each resource type
	// the template can create is in one shape or another.
	"PushAndProxy": {"EnableDatabaseProxy": "true", "PushEndpoint": "a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com",
		"AvailabilityZoneA": givenZones[0], "AvailabilityZoneB": givenZones[1], "Monitoring": "full"},
	// Malware scanning by GuardDuty (docs/scanning.md), at the default
	// Monitoring=essential: the scan alarm it keeps within the free tier.
	"Scanned": {"MalwareScanning": "guardduty"},
}

// translation is the SAM transform's output for every shape, made once
// per test binary (one python3 run for all of them).
var translation struct {
	once sync.Once
	docs map[string]*yaml.Node
	err  error
	skip string
}

// translated returns the template CloudFormation gets for the shape: the
// SAM translator cfn-lint ships, run by testdata/translate.py on
// template.yaml with openapi.yaml included, as the
// AWS::Serverless-2016-10-31 transform runs it; with the shape's
// parameters, its Conditions evaluated (newShape), so that resources()
// is what CloudFormation creates.
func translated(t *testing.T, name string) *shape {
	t.Helper()
	translation.once.Do(func() { translation.docs, translation.skip, translation.err = translate(root(t), translatedShapes) })
	if translation.skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: install it (pip install cfn-lint)", translation.skip)
		}
		t.Skip(translation.skip)
	}
	if translation.err != nil {
		t.Fatal(translation.err)
	}
	doc := translation.docs[name]
	if doc == nil {
		t.Fatalf("no translation of shape %s", name)
	}
	s := newShape(t, template{doc: doc}, translatedShapes[name])
	if r := s.refused(); len(r) > 0 {
		t.Fatalf("shape %s breaks the Rules: %v", name, r)
	}
	return s
}

// translate runs testdata/translate.py over every shape of shapes (by
// name, its parameters).
func translate(root string, shapes map[string]map[string]string) (map[string]*yaml.Node, string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, "python3 is not on PATH; the SAM translator runs in it", nil
	}
	if exec.Command(py, "-c", "import samtranslator, cfnlint").Run() != nil {
		return nil, "python3 cannot import samtranslator and cfnlint (installed with cfn-lint)", nil
	}
	in, err := json.Marshal(shapes)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("internal", "deploytest", "testdata", "translate.py"), root)
	cmd.Dir = root
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", &translateError{err, stderr.String()}
	}
	var docs map[string]yaml.Node
	if err := yaml.Unmarshal(out, &docs); err != nil {
		return nil, "", err
	}
	res := map[string]*yaml.Node{}
	for k, v := range docs {
		res[k] = &v
	}
	return res, "", nil
}

type translateError struct {
	err    error
	stderr string
}

func (e *translateError) Error() string {
	return "the SAM transform of template.yaml: " + e.err.Error() + "\n" + e.stderr
}

// forEachShape runs check as a subtest on each translated shape.
func forEachShape(t *testing.T, check func(t *testing.T, s *shape)) {
	t.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range translatedShapes {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) { check(t, translated(t, name)) })
	}
}

// dependsOn returns every resource id waits for in s: its DependsOn and
// whatever it references (Ref, Fn::GetAtt, Fn::Sub, in its Metadata too),
// followed to the end, as CloudFormation orders its creation.
func (s *shape) dependsOn(id string) map[string]bool {
	created := s.resources()
	direct := func(id string) []string {
		r := created[id]
		found := map[string]bool{}
		refs(r, found)
		if d := get(r, "DependsOn"); d != nil {
			for _, dep := range append(seq(d), scalar(d)) {
				found[dep] = dep != ""
			}
		}
		var out []string
		for dep, ok := range found {
			if _, isResource := created[dep]; ok && isResource && dep != id {
				out = append(out, dep)
			}
		}
		return out
	}
	seen := map[string]bool{}
	todo := direct(id)
	for len(todo) > 0 {
		dep := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if !seen[dep] {
			seen[dep] = true
			todo = append(todo, direct(dep)...)
		}
	}
	return seen
}

// subString is the string of an Fn::Sub (either form), or "", with its
// own variables put in: ${X} where one is a Ref of X, its value where
// it is a string.
func subString(n *yaml.Node) string {
	name, args := fn(n)
	if name != "Fn::Sub" || len(args) == 0 {
		return ""
	}
	str := args[0].Value
	if len(args) == 2 {
		for _, k := range keysOf(args[1]) {
			v := get(args[1], k)
			if r := ref(v); r != "" {
				str = strings.ReplaceAll(str, "${"+k+"}", "${"+r+"}")
			} else {
				str = strings.ReplaceAll(str, "${"+k+"}", scalar(v))
			}
		}
	}
	return str
}

// keysOf returns a mapping's keys.
func keysOf(n *yaml.Node) []string {
	var ks []string
	for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		ks = append(ks, n.Content[i].Value)
	}
	return ks
}

// stageOf returns the logical ID of the one AWS::ApiGateway::Stage of s,
// failing the test unless there is exactly one, named v1, and no
// deployment creates a stage of its own.
func stageOf(t *testing.T, s *shape) string {
	t.Helper()
	created := s.resources()
	for _, id := range s.ofType("AWS::ApiGateway::Deployment") {
		if name := scalar(get(created[id], "Properties", "StageName")); name != "" {
			t.Errorf("%s: creates the stage %q, which nothing throttles, logs or alarms on (OpenApiVersion unset?)", id, name)
		}
	}
	stages := s.ofType("AWS::ApiGateway::Stage")
	if len(stages) != 1 {
		t.Fatalf("AWS::ApiGateway::Stage: got %v, want one (v1)", stages)
	}
	if name := scalar(get(created[stages[0]], "Properties", "StageName")); name != "v1" {
		t.Errorf("%s: StageName %q, want v1", stages[0], name)
	}
	return stages[0]
}

// TestTranslatedOneStage: the REST API has one stage, v1, and it is the
// one throttled (ApiThrottling*, every method) and access-logged (to
// ApiAccessLogs, as JSON with API Gateway's request ids), with tracing.
func TestTranslatedOneStage(t *testing.T) {
	forEachShape(t, func(t *testing.T, s *shape) {
		id := stageOf(t, s)
		p := get(s.resources()[id], "Properties")
		if ref(get(p, "RestApiId")) != "Api" {
			t.Errorf("%s: RestApiId %s, want Ref Api", id, canon(get(p, "RestApiId")))
		}
		ms := get(p, "MethodSettings")
		if ms == nil || len(ms.Content) != 1 {
			t.Fatalf("%s: MethodSettings %s, want one for every method", id, canon(ms))
		}
		m := ms.Content[0]
		if scalar(get(m, "ResourcePath")) != "/*" || scalar(get(m, "HttpMethod")) != "*" ||
			ref(get(m, "ThrottlingRateLimit")) != "ApiThrottlingRateLimit" || ref(get(m, "ThrottlingBurstLimit")) != "ApiThrottlingBurstLimit" {
			t.Errorf("%s: MethodSettings want /* and * throttled by ApiThrottlingRateLimit and ApiThrottlingBurstLimit", id)
		}
		if getAtt(get(p, "AccessLogSetting", "DestinationArn")) != "ApiAccessLogs.Arn" {
			t.Errorf("%s: AccessLogSetting.DestinationArn %s, want ApiAccessLogs.Arn", id, canon(get(p, "AccessLogSetting", "DestinationArn")))
		}
		var line map[string]string
		if err := json.Unmarshal([]byte(scalar(get(p, "AccessLogSetting", "Format"))), &line); err != nil || line["requestId"] != "$context.requestId" {
			t.Errorf("%s: AccessLogSetting.Format is not the JSON line with $context.requestId: %v", id, err)
		}
		if lit(get(p, "TracingEnabled")) != "true" {
			t.Errorf("%s: TracingEnabled %s, want true", id, canon(get(p, "TracingEnabled")))
		}
	})
}

// TestTranslatedRoutes: the REST API's body (openapi.yaml, included) has
// exactly the routes of httpapi.Routes plus an OPTIONS preflight on each
// path, each a Lambda proxy integration of the function serving it; and
// API Gateway may invoke each function on exactly its routes, on the v1
// stage alone.
func TestTranslatedRoutes(t *testing.T) {
	want := map[string]string{} // METHOD path → function's logical ID
	for _, r := range routesWithPreflights() {
		want[r[0]+" "+r[1]] = r[2]
	}
	forEachShape(t, func(t *testing.T, s *shape) {
		created := s.resources()
		stage := stageOf(t, s)
		body := get(created["Api"], "Properties", "Body")
		if body == nil {
			t.Fatal("Api: no Body (openapi.yaml)")
		}
		got := map[string]string{}
		paths := get(body, "paths")
		for _, path := range keysOf(paths) {
			for _, method := range keysOf(get(paths, path)) {
				if method == "parameters" {
					continue
				}
				uri := subString(get(paths, path, method, "x-amazon-apigateway-integration", "uri"))
				fnID := ""
				if _, rest, ok := strings.Cut(uri, "/functions/${"); ok {
					fnID, _, _ = strings.Cut(rest, ".Arn}")
				}
				if typ := scalar(get(paths, path, method, "x-amazon-apigateway-integration", "type")); typ != "aws_proxy" {
					t.Errorf("%s %s: integration type %q, want aws_proxy", method, path, typ)
				}
				if _, ok := created[fnID]; !ok || scalar(get(created[fnID], "Type")) != "AWS::Lambda::Function" {
					t.Errorf("%s %s: integration uri %q names no function of the stack", method, path, uri)
				}
				got[strings.ToUpper(method)+" "+path] = fnID
			}
		}
		if !mapsEqual(got, want) {
			t.Errorf("the API's routes → functions:\ngot  %v\nwant %v", got, want)
		}

		allowed := map[string]string{} // METHOD path-with-* → function
		for id, r := range created {
			p := get(r, "Properties")
			if scalar(get(r, "Type")) != "AWS::Lambda::Permission" || scalar(get(p, "Principal")) != "apigateway.amazonaws.com" {
				continue
			}
			arn := subString(get(p, "SourceArn"))
			_, rest, ok := strings.Cut(arn, ":execute-api:${AWS::Region}:${AWS::AccountId}:${Api}/")
			apiStage, rest, _ := strings.Cut(rest, "/")
			if !ok || apiStage != "${"+stage+"}" {
				t.Errorf("%s: SourceArn %q: stage %q, want ${%s}: the v1 stage only", id, arn, apiStage, stage)
				continue
			}
			method, path, _ := strings.Cut(rest, "/")
			allowed[method+" /"+path] = ref(get(p, "FunctionName"))
		}
		wantAllowed := map[string]string{}
		for k, fn := range want {
			wantAllowed[pathParam.ReplaceAllString(k, "*")] = fn
		}
		if !mapsEqual(allowed, wantAllowed) {
			t.Errorf("API Gateway's permissions to invoke, by route:\ngot  %v\nwant %v", allowed, wantAllowed)
		}
	})
}

// TestTranslatedNoReservedConcurrency: at the defaults no function
// reserves concurrency, so a new account (a quota of 10, all of it the
// unreserved minimum) deploys.
func TestTranslatedNoReservedConcurrency(t *testing.T) {
	forEachShape(t, func(t *testing.T, s *shape) {
		for id, r := range s.resources() {
			if v := get(r, "Properties", "ReservedConcurrentExecutions"); scalar(get(r, "Type")) == "AWS::Lambda::Function" && v != nil {
				t.Errorf("%s: ReservedConcurrentExecutions %s at the defaults", id, canon(v))
			}
		}
	})

	// Asked for, every function that connects to the database reserves
	// its share: 45 at the defaults (docs/deploy.md's connection
	// arithmetic, 90 connections). A function outside the VPC (the IoT
	// endpoint's look-up, once a deploy) holds no connection and reserves
	// nothing.
	tpl := loadTemplate(t)
	s := newShape(t, tpl, map[string]string{"ReserveConcurrency": "true"})
	created, total := s.resources(), 0
	for id, fn := range tpl.functions {
		if created[id] == nil {
			continue // not in this shape (Scanresult: MalwareScanning off)
		}
		if ref(get(fn.node, "Properties", "VpcConfig")) == "AWS::NoValue" {
			if v := get(created[id], "Properties", "ReservedConcurrentExecutions"); v != nil {
				t.Errorf("ReserveConcurrency true: %s, outside the VPC, reserves %s", id, canon(v))
			}
			continue
		}
		v := get(created[id], "Properties", "ReservedConcurrentExecutions")
		if r := ref(v); r != "" {
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: s.params[r][0]}
		}
		n, err := strconv.Atoi(scalar(v))
		if err != nil || n < 1 {
			t.Errorf("ReserveConcurrency true: %s reserves %s, want a number", id, canon(get(created[id], "Properties", "ReservedConcurrentExecutions")))
		}
		total += n
	}
	if total != 45 {
		t.Errorf("ReserveConcurrency true: %d reserved in all at the defaults, want 45 (docs/deploy.md)", total)
	}
}

// TestTranslatedOrdering: in the stack's own network the migrate custom
// resource (its answer to CloudFormation leaves through the S3 gateway
// route) waits for the subnets' routes and the S3 endpoint, and with RDS
// Proxy for the Secrets Manager endpoint too (the functions read the
// master secret then); the proxy and its target group wait for the
// Secrets Manager endpoint (the proxy reads the database's secret
// through it); when the stack sets the account's logging role, it
// does so minutes after creating the role (after the migrations, and
// after the REST API: IAM's eventual consistency, see the template), and
// the API's stage waits for it.
func TestTranslatedOrdering(t *testing.T) {
	waits := func(t *testing.T, s *shape, id string, deps ...string) {
		t.Helper()
		got := s.dependsOn(id)
		for _, d := range deps {
			if !got[d] {
				t.Errorf("%s does not wait for %s", id, d)
			}
		}
	}
	forEachShape(t, func(t *testing.T, s *shape) {
		created := s.resources()
		if _, own := created["Vpc"]; own {
			waits(t, s, "Migrations", "PrivateSubnetARoutes", "PrivateSubnetBRoutes", "S3Endpoint")
			if _, proxy := created["DatabaseProxy"]; proxy {
				waits(t, s, "Migrations", "SecretsManagerEndpoint")
			}
		}
		for _, id := range append(s.ofType("AWS::RDS::DBProxy"), s.ofType("AWS::RDS::DBProxyTargetGroup")...) {
			waits(t, s, id, "SecretsManagerEndpoint")
		}
		if _, ok := created["ApiGatewayAccount"]; ok {
			waits(t, s, "ApiGatewayAccount", "ApiGatewayLogsRole", "Migrations", "Api")
			waits(t, s, stageOf(t, s), "ApiGatewayAccount")
		} else {
			t.Error("no ApiGatewayAccount at CreateApiGatewayAccountRole's default")
		}
	})
	if s := translated(t, "PushAndProxy"); len(s.ofType("AWS::RDS::DBProxy")) != 1 {
		t.Errorf("PushAndProxy: no proxy to hold")
	}
}

// routesWithPreflights returns httpapi.Routes and an OPTIONS preflight on
// each path, each as [method, path, function's logical ID].
func routesWithPreflights() [][3]string {
	var out [][3]string
	for _, r := range httpapi.Routes {
		out = append(out, [3]string{r.Method, r.Path, titleCase(r.Function)}, [3]string{"OPTIONS", r.Path, titleCase(r.Function)})
	}
	return out
}

// TestTranslatedKeepsTheTemplatesResources: the resources the template
// tests read (samtemplate's expansion of the Fn::ForEach loops) are the
// ones CloudFormation gets (cfn-lint's expansion, then the SAM
// transform): every plain CloudFormation resource, by logical ID and
// type, the looped permissions, alarms and log groups among them.
func TestTranslatedKeepsTheTemplatesResources(t *testing.T) {
	tpl := loadTemplate(t)
	res := get(tpl.doc, "Resources")
	forEachShape(t, func(t *testing.T, s *shape) {
		translatedRes := get(s.tpl.doc, "Resources")
		for i := 0; i+1 < len(res.Content); i += 2 {
			id, typ := res.Content[i].Value, scalar(get(res.Content[i+1], "Type"))
			if strings.HasPrefix(typ, "AWS::Serverless::") {
				continue
			}
			if got := scalar(get(translatedRes, id, "Type")); got != typ {
				t.Errorf("%s: %s in the template as the tests read it, %q in the translated template", id, typ, got)
			}
		}
		for _, id := range []string{"UploadRouteInvoke", "ContentDownloadPreflightInvoke", "PushauthErrorsAlarm", "SweepThrottlesAlarm", "AdminLogs"} {
			if get(res, id) == nil {
				t.Errorf("%s: not in the template as the tests read it", id)
			}
		}
	})
}
