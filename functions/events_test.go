package functions_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

// update rewrites events/upload.json from uploadFiles:
//
//	go test ./functions -run TestUploadEvent -update
var update = flag.Bool("update", false, "rewrite events/upload.json from the test's files")

// Placeholders of the sample events in events/ (events/README.md).
const (
	workspacePlaceholder = "7c1e6a2e-3b1f-4c5d-9e8f-0a1b2c3d4e5f"
	filePlaceholder      = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
	// adminToken is the bearer of every HTTP event; the tests start the
	// functions with ADMIN_TOKEN set to it, as sam local invoke users do.
	adminToken = "ADMIN_TOKEN_FOR_LOCAL_INVOKE"
	// uploadBoundary is the multipart boundary of events/upload.json.
	uploadBoundary = "pendinguploads-sample-7c1e6a2e"
)

// pixelPNG is a 1×1 PNG: the non-UTF-8 file of events/upload.json.
var pixelPNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")

// uploadFile is one file part of events/upload.json.
type uploadFile struct {
	filename  string // as sent
	sanitized string // as API.md's SanitizeFilename returns it
	mimetype  string
	data      []byte
}

// uploadFiles are the files of events/upload.json, in request order.
var uploadFiles = []uploadFile{
	{"hello world.txt", "hello_world.txt", "text/plain", []byte("Hello from sam local invoke.\n")},
	{"pixel.png", "pixel.png", "image/png", pixelPNG},
}

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// eventPath returns the path of a sample event, events/<name>.json at the
// module root.
func eventPath(name string) string {
	return filepath.Join("..", "events", name+".json")
}

// readEvent returns the bytes of events/<name>.json.
func readEvent(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(eventPath(name))
	if err != nil {
		tb.Fatalf("read event: %v", err)
	}
	return b
}

// uploadEventJSON builds events/upload.json: a POST of uploadFiles as
// multipart/form-data, base64-encoded as API Gateway passes binary bodies.
// The keys follow the order of the other sample events.
func uploadEventJSON() []byte {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.SetBoundary(uploadBoundary); err != nil {
		panic(err)
	}
	for _, f := range uploadFiles {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", `form-data; name="files"; filename="`+f.filename+`"`)
		h.Set("Content-Type", f.mimetype)
		w, err := mw.CreatePart(h)
		if err != nil {
			panic(err)
		}
		w.Write(f.data)
	}
	mw.Close()

	const route = "/workspaces/{workspaceId}/chat/uploads"
	path := strings.Replace(route, "{workspaceId}", workspacePlaceholder, 1)
	headers := map[string]string{
		"Accept":            "application/json",
		"Authorization":     "Bearer " + adminToken,
		"Content-Length":    strconv.Itoa(body.Len()),
		"Content-Type":      mw.FormDataContentType(),
		"Host":              "abcdef1234.execute-api.us-east-1.amazonaws.com",
		"User-Agent":        "pendingctl/dev",
		"X-Amzn-Trace-Id":   "Root=1-6740a0c8-0123456789abcdef01234567",
		"X-Forwarded-For":   "203.0.113.10",
		"X-Forwarded-Port":  "443",
		"X-Forwarded-Proto": "https",
	}
	multi := make(map[string][]string, len(headers))
	for k, v := range headers {
		multi[k] = []string{v}
	}
	// A REST API (payload 1.0) proxy event; BinaryMediaTypes */* makes API
	// Gateway hand every body over base64-encoded.
	ev := events.APIGatewayProxyRequest{
		Resource:          route,
		Path:              path,
		HTTPMethod:        "POST",
		Headers:           headers,
		MultiValueHeaders: multi,
		PathParameters:    map[string]string{"workspaceId": workspacePlaceholder},
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:         "123456789012",
			APIID:             "abcdef1234",
			DomainName:        "abcdef1234.execute-api.us-east-1.amazonaws.com",
			DomainPrefix:      "abcdef1234",
			ExtendedRequestID: "Pk7sbFHjoAMEb9Q=",
			HTTPMethod:        "POST",
			Identity:          events.APIGatewayRequestIdentity{SourceIP: "203.0.113.10", UserAgent: "pendingctl/dev"},
			Path:              "/v1" + path,
			Protocol:          "HTTP/1.1",
			RequestID:         "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
			RequestTime:       "22/Nov/2026:05:30:00 +0000",
			RequestTimeEpoch:  1795325400000,
			ResourceID:        "abc123",
			ResourcePath:      route,
			Stage:             "v1",
		},
		Body:            base64.StdEncoding.EncodeToString(body.Bytes()),
		IsBase64Encoded: true,
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// TestUploadEvent holds events/upload.json to what it claims: a REST API
// (payload 1.0) event whose base64 body is multipart/form-data with the boundary of its
// Content-Type header, carrying exactly uploadFiles as "files" parts, one
// of them not UTF-8. With -update it rewrites the file first.
func TestUploadEvent(t *testing.T) {
	if *update {
		if err := os.WriteFile(eventPath("upload"), uploadEventJSON(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw := readEvent(t, "upload")
	if want := uploadEventJSON(); !bytes.Equal(raw, want) {
		t.Errorf("events/upload.json differs from what the test builds; run: go test ./functions -run TestUploadEvent -update")
	}

	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !ev.IsBase64Encoded {
		t.Fatalf("isBase64Encoded: got false, want true")
	}
	if got, want := ev.Headers["Authorization"], "Bearer "+adminToken; got != want {
		t.Errorf("authorization: got %q, want %q", got, want)
	}
	body, err := base64.StdEncoding.DecodeString(ev.Body)
	if err != nil {
		t.Fatalf("body is not base64: %v", err)
	}
	if got, want := ev.Headers["Content-Length"], strconv.Itoa(len(body)); got != want {
		t.Errorf("content-length: got %s, want %s (the decoded body's size)", got, want)
	}
	mediatype, params, err := mime.ParseMediaType(ev.Headers["Content-Type"])
	if err != nil || mediatype != "multipart/form-data" || params["boundary"] == "" {
		t.Fatalf("content-type %q: got %s %v (%v), want multipart/form-data with a boundary", ev.Headers["Content-Type"], mediatype, params, err)
	}

	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var got []uploadFile
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("multipart part: %v", err)
		}
		if p.FormName() != "files" {
			t.Errorf("part named %q: want only \"files\" parts", p.FormName())
		}
		got = append(got, uploadFile{filename: p.FileName(), mimetype: p.Header.Get("Content-Type"), data: data})
	}
	if len(got) != len(uploadFiles) {
		t.Fatalf("files: got %d, want %d", len(got), len(uploadFiles))
	}
	binary := 0
	for i, f := range got {
		want := uploadFiles[i]
		if f.filename != want.filename || f.mimetype != want.mimetype || !bytes.Equal(f.data, want.data) {
			t.Errorf("file %d: got %q %q %x, want %q %q %x", i, f.filename, f.mimetype, f.data, want.filename, want.mimetype, want.data)
		}
		if !utf8.Valid(f.data) {
			binary++
		}
	}
	if binary != 1 {
		t.Errorf("non-UTF-8 files: got %d, want 1", binary)
	}
	if _, err := png.Decode(bytes.NewReader(pixelPNG)); err != nil {
		t.Errorf("pixel.png is not a PNG: %v", err)
	}
}

// TestEvents checks that every sample event decodes into the type its
// function takes, and that the HTTP ones are consistent with
// httpapi.Routes and with the placeholders of events/README.md.
func TestEvents(t *testing.T) {
	routes := make(map[string]httpapi.Route)
	for _, r := range httpapi.Routes {
		if _, ok := routes[r.Function]; !ok { // list also serves GET /uploads/limits
			routes[r.Function] = r
		}
	}
	for _, fn := range []string{"upload", "presign", "list", "content", "ack"} {
		t.Run(fn, func(t *testing.T) {
			var ev events.APIGatewayProxyRequest
			dec := json.NewDecoder(bytes.NewReader(readEvent(t, fn)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			rt, ok := routes[fn]
			if !ok {
				t.Fatalf("no route for %s in httpapi.Routes", fn)
			}
			if ev.Resource != rt.Path || ev.RequestContext.ResourcePath != rt.Path {
				t.Errorf("resource: got %q / %q, want %q", ev.Resource, ev.RequestContext.ResourcePath, rt.Path)
			}
			if ev.HTTPMethod != rt.Method || ev.RequestContext.HTTPMethod != rt.Method {
				t.Errorf("method: got %q / %q, want %q", ev.HTTPMethod, ev.RequestContext.HTTPMethod, rt.Method)
			}
			path := strings.NewReplacer("{workspaceId}", workspacePlaceholder, "{fileId}", filePlaceholder).Replace(rt.Path)
			if ev.Path != path || ev.RequestContext.Path != "/"+ev.RequestContext.Stage+path {
				t.Errorf("path: got %q / %q, want %q under the stage", ev.Path, ev.RequestContext.Path, path)
			}
			if ev.Body != "" && !ev.IsBase64Encoded {
				t.Errorf("a body not base64-encoded: API Gateway's BinaryMediaTypes */* encodes every body")
			}
			if ev.PathParameters["workspaceId"] != workspacePlaceholder {
				t.Errorf("pathParameters.workspaceId: got %q, want %q", ev.PathParameters["workspaceId"], workspacePlaceholder)
			}
			if strings.Contains(rt.Path, "{fileId}") && ev.PathParameters["fileId"] != filePlaceholder {
				t.Errorf("pathParameters.fileId: got %q, want %q", ev.PathParameters["fileId"], filePlaceholder)
			}
			if got, want := ev.Headers["Authorization"], "Bearer "+adminToken; got != want {
				t.Errorf("authorization: got %q, want %q", got, want)
			}
			if got := ev.MultiValueHeaders["Authorization"]; len(got) != 1 || got[0] != "Bearer "+adminToken {
				t.Errorf("multiValueHeaders.Authorization: got %q", got)
			}
		})
	}
	t.Run("sweep", func(t *testing.T) {
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(readEvent(t, "sweep"), &ev); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" {
			t.Errorf("got %q from %q, want a Scheduled Event from aws.events", ev.DetailType, ev.Source)
		}
	})
	t.Run("env", func(t *testing.T) {
		// The --env-vars file gives every HTTP function the events' admin
		// token, and every function a DATABASE_URL.
		var env map[string]map[string]string
		if err := json.Unmarshal(readEvent(t, "env"), &env); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if env["Parameters"]["DATABASE_URL"] == "" {
			t.Errorf("Parameters.DATABASE_URL is not set")
		}
		for _, fn := range []string{"upload", "presign", "list", "content", "ack"} {
			id := strings.ToUpper(fn[:1]) + fn[1:] // lambda.mk: the logical ID is the directory in title case
			if got := env[id]["ADMIN_TOKEN"]; got != adminToken {
				t.Errorf("%s.ADMIN_TOKEN: got %q, want %q", id, got, adminToken)
			}
		}
	})
	t.Run("admin", func(t *testing.T) {
		var req admin.Request
		dec := json.NewDecoder(bytes.NewReader(readEvent(t, "admin")))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if req.Action != admin.ActionCreate || req.Workspace != workspacePlaceholder {
			t.Errorf("got %+v, want a create for the placeholder workspace", req)
		}
	})
	t.Run("migrate", func(t *testing.T) {
		var ev cfn.Event
		if err := json.Unmarshal(readEvent(t, "migrate"), &ev); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if ev.RequestType != cfn.RequestCreate || ev.ResponseURL == "" || ev.RequestID == "" ||
			ev.StackID == "" || ev.LogicalResourceID == "" || ev.ResourceType != "Custom::Migrate" {
			t.Errorf("got %+v, want a complete Custom::Migrate Create request", ev)
		}
	})
	t.Run("iotendpoint", func(t *testing.T) {
		var ev cfn.Event
		if err := json.Unmarshal(readEvent(t, "iotendpoint"), &ev); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if ev.RequestType != cfn.RequestCreate || ev.ResponseURL == "" || ev.RequestID == "" ||
			ev.LogicalResourceID != "PushEndpointLookup" || ev.ResourceType != "Custom::IotEndpoint" {
			t.Errorf("got %+v, want a complete Custom::IotEndpoint Create request for PushEndpointLookup", ev)
		}
	})
	t.Run("pushrelay", func(t *testing.T) {
		// The hint table's item the upload function writes for the
		// placeholder file, as the stream hands it over.
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(readEvent(t, "pushrelay"), &ev); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		ws, file := uuid.MustParse(workspacePlaceholder), uuid.MustParse(filePlaceholder)
		if len(ev.Records) != 1 || ev.Records[0].EventName != "INSERT" || ev.Records[0].EventSource != "aws:dynamodb" {
			t.Fatalf("got %+v, want one INSERT of a DynamoDB stream", ev.Records)
		}
		img := ev.Records[0].Change.NewImage
		if img[push.AttrTopic].String() != push.Topic(ws) ||
			img[push.AttrPayload].String() != string(push.Hint{WorkspaceID: ws, FileIDs: []uuid.UUID{file}}.Payload()) {
			t.Errorf("new image %v: want the placeholder file's hint on its workspace's topic", img)
		}
	})
}
