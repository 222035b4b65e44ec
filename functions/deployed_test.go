package functions_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/samtemplate"
)

// deployedRoute is one operation of openapi.yaml, the REST API's
// definition: what API Gateway sends to which function once deployed.
type deployedRoute struct {
	Method, Path string
	LogicalID    string // the function's logical ID in template.yaml
	Dir          string // its directory under functions/, from lambda.mk
}

// integrationFunction is the function a Lambda integration's uri names:
// ${Upload.Arn} → Upload.
var integrationFunction = regexp.MustCompile(`/functions/\$\{([A-Za-z0-9]+)\.Arn\}/`)

// deployedRoutes reads openapi.yaml's operations with the function each
// one's integration invokes, and lambda.mk's LogicalId:dir pairs (the
// build sam runs), from the repository root: the deployed shape,
// independent of the route table the binaries read.
func deployedRoutes(t *testing.T) []deployedRoute {
	t.Helper()
	b, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"` // operations, and a path's parameters
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var op struct {
		Integration struct {
			URI struct {
				Sub string `yaml:"Fn::Sub"`
			} `yaml:"uri"`
		} `yaml:"x-amazon-apigateway-integration"`
	}
	dirs, err := samtemplate.LambdaFunctions("..")
	if err != nil {
		t.Fatal(err)
	}
	var routes []deployedRoute
	for path, ops := range doc.Paths {
		for method, node := range ops {
			if method == "parameters" {
				continue
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("openapi.yaml: %s %s: %v", method, path, err)
			}
			m := integrationFunction.FindStringSubmatch(op.Integration.URI.Sub)
			if m == nil {
				t.Fatalf("openapi.yaml: %s %s: no Lambda integration naming a function", method, path)
			}
			dir, ok := dirs[m[1]]
			if !ok {
				t.Fatalf("openapi.yaml: %s %s invokes %s, which has no build in lambda.mk", method, path, m[1])
			}
			routes = append(routes, deployedRoute{strings.ToUpper(method), path, m[1], dir})
		}
	}
	slices.SortFunc(routes, func(a, b deployedRoute) int {
		return strings.Compare(a.Dir+a.Path+a.Method, b.Dir+b.Path+b.Method)
	})
	return routes
}

// routeEvent is a REST API proxy event (payload 1.0) for method on the
// route template resource with params, shaped as list.json (the sample
// event of a real API Gateway request), with headers added and body as it
// is (nil: none). A header given as "" is removed.
func routeEvent(t *testing.T, method, resource string, params map[string]string, headers map[string]string, body []byte) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(readEvent(t, "list"), &ev); err != nil {
		t.Fatal(err)
	}
	path := resource
	pp := map[string]any{}
	for k, v := range params {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
		pp[k] = v
	}
	if len(pp) == 0 {
		ev["pathParameters"] = nil
	} else {
		ev["pathParameters"] = pp
	}
	ev["httpMethod"], ev["resource"], ev["path"] = method, resource, path
	ev["queryStringParameters"], ev["multiValueQueryStringParameters"] = nil, nil
	ev["body"] = nil
	if body != nil {
		ev["body"] = string(body)
	}
	hs, mv := ev["headers"].(map[string]any), ev["multiValueHeaders"].(map[string]any)
	for k, v := range headers {
		if v == "" {
			delete(hs, k)
			delete(mv, k)
			continue
		}
		hs[k], mv[k] = v, []any{v}
	}
	rc := ev["requestContext"].(map[string]any)
	rc["httpMethod"], rc["resourcePath"], rc["path"] = method, resource, "/v1"+path
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// routerNotFound is the body of the router's own 404: what a function
// answers for a route it does not serve.
const routerNotFound = `{"error":"not found","code":"not_found"}`

// TestEveryDeployedRoute: every operation of openapi.yaml reaches a
// function that serves it. Each function is built from its own main as
// Lambda builds it and started under the Runtime API, over Postgres and a
// bucket (every route enabled); each route of the API, its CORS
// preflights (OPTIONS events) included, is sent to the function it names,
// with and without a custom domain's base path. None may answer the
// router's 404 or a 405: the API's definition and the binaries agree on who
// serves what. (The answers themselves are the other tests' business;
// here IDs are random, so a route's own 404 is fine.)
func TestEveryDeployedRoute(t *testing.T) {
	t.Parallel()
	routes := deployedRoutes(t)
	if len(routes) < 8 {
		t.Fatalf("openapi.yaml: %d operations, want at least the 8 routes of API.md", len(routes))
	}
	ep := s3test.MustStart(t)
	_, bucket := s3test.NewBucket(t, ep)
	env := append(dbEnv(knownDB(t)), ep.Env()...)
	env = append(env, "CONTENT_BUCKET="+bucket, "CORS_ALLOWED_ORIGINS=https://canvas.example.com")
	rts := map[string]*lambdatest.Runtime{}
	params := map[string]string{"workspaceId": workspacePlaceholder, "fileId": uuid.NewString(), "uploadId": uuid.NewString()}
	methodsOf := map[string]string{} // path -> a method the template routes on it, for its preflight
	for _, r := range routes {
		if r.Method != http.MethodOptions {
			methodsOf[r.Path] = r.Method
		}
	}
	for _, r := range routes {
		if rts[r.Dir] == nil {
			rts[r.Dir] = start(t, r.Dir, env...)
		}
		headers := map[string]string{"Content-Type": "application/json", "Origin": "https://canvas.example.com"}
		var body []byte
		switch r.Method {
		case http.MethodOptions: // a browser's preflight: no credentials
			headers = map[string]string{"Origin": "https://canvas.example.com", "Access-Control-Request-Method": methodsOf[r.Path],
				"Access-Control-Request-Headers": "authorization,content-type", "Authorization": ""}
		case http.MethodPost:
			body = []byte(`{}`)
		}
		event := routeEvent(t, r.Method, r.Path, params, headers, body)
		for _, based := range []bool{false, true} {
			name := r.Dir + "/" + r.Method + " " + r.Path
			ev := event
			if based {
				name, ev = name+" behind /uploads", behindCustomDomain(t, event)
			}
			t.Run(name, func(t *testing.T) {
				resp := invokeHTTP(t, rts[r.Dir], ev)
				if resp.StatusCode == http.StatusMethodNotAllowed ||
					(resp.StatusCode == http.StatusNotFound && strings.TrimSpace(string(responseBody(t, resp))) == routerNotFound) {
					t.Fatalf("%s %s sent to %s (functions/%s): got the router's %d %s: the function does not serve a route openapi.yaml gives it",
						r.Method, r.Path, r.LogicalID, r.Dir, resp.StatusCode, responseBody(t, resp))
				}
				if r.Method == http.MethodOptions && resp.StatusCode != http.StatusNoContent {
					t.Errorf("preflight: got %d %s, want 204", resp.StatusCode, responseBody(t, resp))
				}
			})
		}
	}
}

// putPart sends one part to its presigned URL, as a client does.
func putPart(t *testing.T, u string, headers map[string]string, data []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if !strings.EqualFold(k, "Content-Length") {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		t.Fatalf("PUT part: %d %s", res.StatusCode, b)
	}
}
