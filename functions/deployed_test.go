package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/samtemplate"
	"github.com/pendinguploads/pendinguploads/wire"
)

// deployedRoute is one Api event of template.yaml: what API Gateway sends
// to which function once deployed.
type deployedRoute struct {
	Method, Path string
	LogicalID    string // the function's logical ID in template.yaml
	Dir          string // its directory under functions/, from lambda.mk
}

// deployedRoutes reads template.yaml's Api events and lambda.mk's
// LogicalId:dir pairs (the build sam runs) from the repository root: the
// deployed shape, independent of the route table the binaries read.
func deployedRoutes(t *testing.T) []deployedRoute {
	t.Helper()
	doc, err := samtemplate.Read("..")
	if err != nil {
		t.Fatal(err)
	}
	// Only the fields read here are declared: yaml.v3 skips the rest,
	// CloudFormation's short forms (!Ref, !Sub, ...) included.
	var tpl struct {
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Events map[string]struct {
					Type       string `yaml:"Type"`
					Properties struct {
						Method string `yaml:"Method"`
						Path   string `yaml:"Path"`
					} `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := doc.Decode(&tpl); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	dirs, err := samtemplate.LambdaFunctions("..")
	if err != nil {
		t.Fatal(err)
	}
	var routes []deployedRoute
	for id, res := range tpl.Resources {
		if res.Type != "AWS::Serverless::Function" {
			continue
		}
		for name, ev := range res.Properties.Events {
			if ev.Type != "Api" {
				continue
			}
			dir, ok := dirs[id]
			if !ok {
				t.Fatalf("template.yaml: %s (event %s) has no build in lambda.mk", id, name)
			}
			routes = append(routes, deployedRoute{strings.ToUpper(ev.Properties.Method), ev.Properties.Path, id, dir})
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

// TestEveryDeployedRoute: every Api event of template.yaml reaches a
// function that serves it. Each function is built from its own main as
// Lambda builds it and started under the Runtime API, over Postgres and a
// bucket (every route enabled); each route of the template, its CORS
// preflights (OPTIONS events) included, is sent to the function it names,
// with and without a custom domain's base path. None may answer the
// router's 404 or a 405: the template and the binaries agree on who
// serves what. (The answers themselves are the other tests' business;
// here IDs are random, so a route's own 404 is fine.)
func TestEveryDeployedRoute(t *testing.T) {
	t.Parallel()
	routes := deployedRoutes(t)
	if len(routes) < 8 {
		t.Fatalf("template.yaml: %d Api events, want at least the 8 routes of API.md", len(routes))
	}
	ep := s3test.MustStart(t)
	_, bucket := s3test.NewBucket(t, ep)
	env := append(dbEnv(pgtest.MustURL(t)), ep.Env()...)
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
					t.Fatalf("%s %s sent to %s (functions/%s): got the router's %d %s: the function does not serve a route the template gives it",
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

// TestResumeAndAbortThroughBinaries: an upload in parts cut after its
// first part is resumed through the presign binary (only the missing
// parts signed), committed through the upload binary and read back
// byte-exact through the content binary; another is aborted through the
// presign binary. The bucket then holds the committed file's object and
// nothing else: no staging copy, no incomplete multipart upload.
func TestResumeAndAbortThroughBinaries(t *testing.T) {
	t.Parallel()
	ep := s3test.MustStart(t)
	s3c, bucket := s3test.NewBucket(t, ep)
	env := append(dbEnv(pgtest.MustURL(t)), ep.Env()...)
	env = append(env, "CONTENT_BUCKET="+bucket, "MULTIPART_THRESHOLD_BYTES=5242880", "MULTIPART_PART_BYTES=5242880")
	presign, upload, content := start(t, "presign", env...), start(t, "upload", env...), start(t, "content", env...)
	ws := map[string]string{"workspaceId": workspacePlaceholder}
	const presignPath = "/workspaces/{workspaceId}/chat/uploads/presign"
	plan := func(name string, size int) wire.PresignedUpload {
		body := fmt.Sprintf(`{"files":[{"name":%q,"size":%d,"multipart":true}]}`, name, size)
		var out struct{ Uploads []wire.PresignedUpload }
		wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath, ws, map[string]string{"Content-Type": "application/json"}, []byte(body))), http.StatusOK, &out)
		if len(out.Uploads) != 1 || out.Uploads[0].Multipart == nil {
			t.Fatalf("presign: %+v, want one upload in parts", out)
		}
		return out.Uploads[0]
	}
	withUpload := func(id string) map[string]string {
		return map[string]string{"workspaceId": workspacePlaceholder, "uploadId": id}
	}

	data := randomFile(11<<20 + 7)
	cut := plan("cut.bin", len(data))
	if n := cut.Multipart.PartCount; n != 3 || len(cut.Multipart.Parts) != 3 {
		t.Fatalf("plan: %d parts (%d signed), want 3", n, len(cut.Multipart.Parts))
	}
	p := cut.Multipart.Parts[0]
	putPart(t, p.URL, p.Headers, data[:p.Size])
	// The connection drops; the client resumes.
	var resumed wire.PresignedUpload
	wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath+"/{uploadId}", withUpload(cut.UploadID.String()), nil, nil)), http.StatusOK, &resumed)
	if r := resumed.Multipart; r == nil || len(r.Received) != 1 || r.Received[0].PartNumber != 1 || len(r.Parts) != 2 {
		t.Fatalf("resume: %+v, want part 1 received and parts 2, 3 signed", resumed.Multipart)
	}
	for _, p := range resumed.Multipart.Parts {
		off := int64(p.PartNumber-1) * (5 << 20)
		putPart(t, p.URL, p.Headers, data[off:off+p.Size])
	}
	var staged struct{ Files []stagedFile }
	commit := fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, cut.UploadID.String())
	wantJSON(t, invokeHTTP(t, upload, routeEvent(t, "POST", "/workspaces/{workspaceId}/chat/uploads", ws,
		map[string]string{"Content-Type": "application/json"}, []byte(commit))), http.StatusOK, &staged)
	if len(staged.Files) != 1 || staged.Files[0].Size != int64(len(data)) {
		t.Fatalf("commit: %+v", staged.Files)
	}
	got := invokeHTTP(t, content, routeEvent(t, "GET", "/workspaces/{workspaceId}/pending-uploads/{fileId}/content",
		map[string]string{"workspaceId": workspacePlaceholder, "fileId": staged.Files[0].FileID}, nil, nil))
	if got.StatusCode != http.StatusOK || !bytes.Equal(responseBody(t, got), data) {
		t.Fatalf("content: %d, %d bytes; want 200 and the %d bytes sent", got.StatusCode, len(responseBody(t, got)), len(data))
	}

	// Another upload is abandoned after a part: abort.
	gone := plan("gone.bin", len(data))
	p = gone.Multipart.Parts[0]
	putPart(t, p.URL, p.Headers, data[:p.Size])
	abort := invokeHTTP(t, presign, routeEvent(t, "DELETE", presignPath+"/{uploadId}", withUpload(gone.UploadID.String()), nil, nil))
	var aborted struct{ Aborted bool }
	if wantJSON(t, abort, http.StatusOK, &aborted); !aborted.Aborted {
		t.Fatalf("abort: got %s, want aborted true", abort.Body)
	}
	again := invokeHTTP(t, presign, routeEvent(t, "POST", presignPath+"/{uploadId}", withUpload(gone.UploadID.String()), nil, nil))
	if again.StatusCode != http.StatusNotFound {
		t.Errorf("resume after abort: got %d %s, want 404", again.StatusCode, again.Body)
	}

	ctx := context.Background()
	mu, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(mu.Uploads) != 0 {
		t.Errorf("incomplete multipart uploads: got %d, want 0", len(mu.Uploads))
	}
	objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "objects/") {
		t.Errorf("bucket: got %v, want the committed file's object alone", keys)
	}
}
