package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
)

// seq returns the plain scalars of a sequence node.
func seq(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}

// loadOpenAPI reads openapi.yaml as plain data (its Fn::Sub are in long
// form, so no tags).
func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return doc
}

// TestRestAPI: the API is a REST API named Api with stage v1, defined by
// openapi.yaml, passing every body as bytes, throttled and access-logged
// with API Gateway's request ids; nothing of the HTTP API is left.
func TestRestAPI(t *testing.T) {
	tpl := loadTemplate(t)
	resources := get(tpl.doc, "Resources")
	for i := 0; i+1 < len(resources.Content); i += 2 {
		if typ := scalar(get(resources.Content[i+1], "Type")); strings.Contains(typ, "HttpApi") || strings.HasPrefix(typ, "AWS::ApiGatewayV2::") {
			t.Errorf("template.yaml: %s is an HTTP API resource (%s); the API is a REST API", resources.Content[i].Value, typ)
		}
	}
	api := get(resources, "Api")
	if scalar(get(api, "Type")) != "AWS::Serverless::Api" {
		t.Fatalf("template.yaml: Api: got Type %q, want AWS::Serverless::Api", scalar(get(api, "Type")))
	}
	p := get(api, "Properties")
	if got := scalar(get(p, "StageName")); got != "v1" {
		t.Errorf("Api.StageName: got %q, want v1", got)
	}
	inc := get(p, "DefinitionBody", "Fn::Transform")
	if scalar(get(inc, "Name")) != "AWS::Include" || scalar(get(inc, "Parameters", "Location")) != "openapi.yaml" {
		t.Errorf("Api.DefinitionBody: want Fn::Transform AWS::Include of Location openapi.yaml")
	}
	if get(p, "DefinitionUri") != nil {
		t.Errorf("Api: DefinitionUri set; an external file there cannot carry the integrations' Fn::Sub")
	}

	// Binary media types: the template's list (~1 for /) is the document's.
	doc := loadOpenAPI(t)
	var docTypes []string
	for _, v := range doc["x-amazon-apigateway-binary-media-types"].([]any) {
		docTypes = append(docTypes, v.(string))
	}
	var tplTypes []string
	for _, v := range seq(get(p, "BinaryMediaTypes")) {
		tplTypes = append(tplTypes, strings.ReplaceAll(v, "~1", "/"))
	}
	if !slices.Contains(tplTypes, "*/*") || !slices.Equal(tplTypes, docTypes) {
		t.Errorf("BinaryMediaTypes: template %v, openapi.yaml %v; want both [*/*]", tplTypes, docTypes)
	}

	ms := get(p, "MethodSettings")
	if ms == nil || ms.Kind != yaml.SequenceNode || len(ms.Content) != 1 {
		t.Fatal("Api.MethodSettings: want one entry for every method")
	}
	m := ms.Content[0]
	if scalar(get(m, "ResourcePath")) != "/*" || scalar(get(m, "HttpMethod")) != "*" ||
		ref(get(m, "ThrottlingRateLimit")) != "ApiThrottlingRateLimit" || ref(get(m, "ThrottlingBurstLimit")) != "ApiThrottlingBurstLimit" {
		t.Errorf("Api.MethodSettings: want /* and * throttled by !Ref ApiThrottlingRateLimit and ApiThrottlingBurstLimit")
	}

	if getAtt(get(p, "AccessLogSetting", "DestinationArn")) != "ApiAccessLogs.Arn" {
		t.Errorf("Api.AccessLogSetting.DestinationArn: want !GetAtt ApiAccessLogs.Arn")
	}
	format := scalar(get(p, "AccessLogSetting", "Format"))
	var line map[string]string
	if err := json.Unmarshal([]byte(format), &line); err != nil {
		t.Errorf("Api.AccessLogSetting.Format is not one JSON object: %v\n%s", err, format)
	}
	for _, want := range []string{"$context.requestId", "$context.extendedRequestId", "$context.status", "$context.integrationErrorMessage"} {
		if !strings.Contains(format, `"`+want+`"`) {
			t.Errorf("Api.AccessLogSetting.Format lacks %s", want)
		}
	}

	alarm := get(resources, "Api5xxAlarm", "Properties")
	dims := map[string]*yaml.Node{}
	for _, d := range get(alarm, "Dimensions").Content {
		dims[scalar(get(d, "Name"))] = get(d, "Value")
	}
	if scalar(get(alarm, "Namespace")) != "AWS/ApiGateway" || scalar(get(alarm, "MetricName")) != "5XXError" ||
		dims["ApiName"] == nil || dims["Stage"] == nil || len(dims) != 2 {
		t.Errorf("Api5xxAlarm: want AWS/ApiGateway 5XXError by ApiName and Stage")
	}
	// A paused database's resume (15-30 s of 503s) must not page by
	// itself: 5xx in two 5-minute periods running (docs/operating.md).
	if scalar(get(alarm, "Period")) != "300" || scalar(get(alarm, "EvaluationPeriods")) != "2" || scalar(get(alarm, "DatapointsToAlarm")) != "2" {
		t.Errorf("Api5xxAlarm: Period %s, EvaluationPeriods %s, DatapointsToAlarm %s; want 300, 2, 2",
			scalar(get(alarm, "Period")), scalar(get(alarm, "EvaluationPeriods")), scalar(get(alarm, "DatapointsToAlarm")))
	}
	if got, want := ref(dims["ApiName"]), ref(get(p, "Name")); got == "" || got != want {
		t.Errorf("Api5xxAlarm: ApiName is !Ref %q, Api.Name is !Ref %q; want the same", got, want)
	}
	if v := get(tpl.doc, "Outputs", "ApiUrl", "Value"); v == nil || v.Tag != "!Sub" || !strings.Contains(v.Value, "${Api}") {
		t.Errorf("Outputs.ApiUrl: want a !Sub of ${Api}")
	}
}

// TestIntegrations: every operation of openapi.yaml is a Lambda proxy
// integration of the function that serves its path in httpapi.Routes, the
// preflight included; the content route's (both methods) streams, through
// Lambda's response-streaming invocation, with a function timeout that
// covers the integration's.
func TestIntegrations(t *testing.T) {
	tpl := loadTemplate(t)
	doc := loadOpenAPI(t)
	fnOf := map[string]string{}
	for _, r := range httpapi.Routes {
		fnOf[r.Path] = titleCase(r.Function)
	}
	paths, _ := doc["paths"].(map[string]any)
	streamTimeout := 0
	for path, item := range paths {
		fn, ok := fnOf[path]
		if !ok {
			t.Errorf("openapi.yaml: path %s is not in httpapi.Routes", path)
			continue
		}
		if _, ok := tpl.functions[fn]; !ok {
			t.Errorf("openapi.yaml: %s is served by %s, which template.yaml does not deploy", path, fn)
		}
		// The content function's handler streams (lambdafn.Stream), so
		// every route it serves, its download links' too, has the
		// streaming integration.
		streams := fn == "Content"
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			where := "openapi.yaml: " + strings.ToUpper(method) + " " + path
			in, _ := op.(map[string]any)["x-amazon-apigateway-integration"].(map[string]any)
			if in == nil {
				t.Errorf("%s: no x-amazon-apigateway-integration", where)
				continue
			}
			if in["type"] != "aws_proxy" || in["httpMethod"] != "POST" {
				t.Errorf("%s: got type %v httpMethod %v, want aws_proxy POST", where, in["type"], in["httpMethod"])
			}
			uri, _ := in["uri"].(map[string]any)["Fn::Sub"].(string)
			wantURI := "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${" + fn + ".Arn}/invocations"
			if streams {
				wantURI = "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/${" + fn + ".Arn}/response-streaming-invocations"
			}
			if uri != wantURI {
				t.Errorf("%s: uri Fn::Sub %q, want %q", where, uri, wantURI)
			}
			mode, _ := in["responseTransferMode"].(string)
			switch {
			case streams && mode != "STREAM":
				t.Errorf("%s: responseTransferMode %q, want STREAM", where, mode)
			case !streams && mode != "":
				t.Errorf("%s: responseTransferMode %q; only the content function streams", where, mode)
			}
			if streams {
				ms, _ := in["timeoutInMillis"].(int)
				if ms <= 29000 || ms > 900000 {
					t.Errorf("%s: timeoutInMillis %v, want above 29 s (a stream outlasts a buffered answer) and at most 15 minutes", where, in["timeoutInMillis"])
				}
				streamTimeout = max(streamTimeout, ms)
			}
		}
	}
	content := get(tpl.functions["Content"].node, "Properties", "Timeout")
	secs, _ := strconv.Atoi(scalar(content))
	if secs*1000 < streamTimeout {
		t.Errorf("template.yaml: Content's Timeout %q s is shorter than its streaming integration's %d ms", scalar(content), streamTimeout)
	}
}

// TestCORSSettings: CorsAllowedOrigins reaches the functions as
// CORS_ALLOWED_ORIGINS, and the bucket lets browsers PUT presigned uploads
// and GET redirected downloads (from which origins:
// TestLocalBucketIsTheTemplates).
func TestCORSSettings(t *testing.T) {
	tpl := loadTemplate(t)
	if got := scalar(get(tpl.doc, "Parameters", "CorsAllowedOrigins", "Type")); got != "CommaDelimitedList" {
		t.Errorf("Parameters.CorsAllowedOrigins: got Type %q, want CommaDelimitedList", got)
	}
	env := get(tpl.doc, "Globals", "Function", "Environment", "Variables", "CORS_ALLOWED_ORIGINS")
	if env == nil || env.Tag != "!Join" || len(env.Content) != 2 || env.Content[0].Value != "," || ref(env.Content[1]) != "CorsAllowedOrigins" {
		t.Errorf(`Globals: CORS_ALLOWED_ORIGINS: want !Join [",", !Ref CorsAllowedOrigins]`)
	}
	cors := get(tpl.doc, "Resources", "ContentBucket", "Properties", "CorsConfiguration")
	if cors == nil || cors.Tag != "!If" || len(cors.Content) != 3 {
		t.Fatal("ContentBucket.CorsConfiguration: want !If [HasCors, rules, NoValue]")
	}
	rules := get(cors.Content[1], "CorsRules")
	if rules == nil || len(rules.Content) != 1 {
		t.Fatal("ContentBucket.CorsConfiguration: want one rule")
	}
	rule := rules.Content[0]
	if got := seq(get(rule, "AllowedMethods")); !slices.Contains(got, "PUT") || !slices.Contains(got, "GET") || len(got) != 2 {
		t.Errorf("bucket CORS AllowedMethods: got %v, want PUT and GET", got)
	}
	headers := seq(get(rule, "AllowedHeaders"))
	for _, h := range []string{"Content-Type", "Content-Length", "x-amz-checksum-sha256", "x-amz-*"} {
		if !slices.Contains(headers, h) {
			t.Errorf("bucket CORS AllowedHeaders: got %v, lacks %s", headers, h)
		}
	}
	if slices.Contains(headers, "*") {
		t.Errorf("bucket CORS AllowedHeaders: got %v; want only what a presigned PUT carries", headers)
	}
	if got := seq(get(rule, "ExposedHeaders")); !slices.Contains(got, "ETag") {
		t.Errorf("bucket CORS ExposedHeaders: got %v, want ETag", got)
	}
}

// TestSessionSettings: the session cookie's settings reach every function
// from their parameters, empty by default (sessions off), which the
// configuration takes as unset.
func TestSessionSettings(t *testing.T) {
	tpl := loadTemplate(t)
	for param, env := range map[string]string{
		"CpUpstreamUrl": "CP_UPSTREAM_URL", "MoleculeOrgSlug": "MOLECULE_ORG_SLUG", "PublicOrigin": "PUBLIC_ORIGIN",
	} {
		if got := scalar(get(tpl.doc, "Parameters", param, "Default")); got != "" {
			t.Errorf("Parameters.%s: default %q, want empty (sessions off)", param, got)
		}
		if v := get(tpl.doc, "Globals", "Function", "Environment", "Variables", env); v == nil || ref(v) != param {
			t.Errorf("Globals: %s: want !Ref %s", env, param)
		}
	}
}
