package functions_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/samtemplate"
)

// templatePolicies reads the S3 and DynamoDB statements template.yaml
// grants each function (logical ID → policy) for a stack whose bucket is
// named bucket and on, with push on and its hint table named hintTable
// (the HasBucket and HasPush conditions true): the Statement entries of
// each function's Policies, with !Sub of ${ContentBucket.Arn} and
// ${ContentBucket}, !GetAtt ContentBucket.Arn and !GetAtt PushHints.Arn
// resolved, and s3:prefix StringLike conditions kept. Anything it cannot
// evaluate that touches S3 or DynamoDB (an S3 policy template of SAM, a
// condition other than HasBucket or HasPush around such statements)
// fails the test rather than being guessed.
func templatePolicies(t *testing.T, bucket, hintTable string) map[string]s3test.Policy {
	t.Helper()
	doc, err := samtemplate.Read("..")
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:s3:::" + bucket
	resolve := func(n *yaml.Node) []string {
		one := func(n *yaml.Node) string {
			switch {
			case n.Kind == yaml.ScalarNode && n.Tag == "!Sub":
				return strings.NewReplacer("${ContentBucket.Arn}", arn, "${ContentBucket}", bucket).Replace(n.Value)
			case n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt" && n.Value == "ContentBucket.Arn":
				return arn
			case n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt" && n.Value == "PushHints.Arn":
				return s3test.TableARN(hintTable)
			case n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == ""):
				return n.Value
			}
			t.Fatalf("template.yaml line %d: cannot evaluate %s %q in an S3 statement", n.Line, n.Tag, n.Value)
			return ""
		}
		if n.Kind == yaml.SequenceNode && n.Tag != "!GetAtt" {
			var out []string
			for _, c := range n.Content {
				out = append(out, one(c))
			}
			return out
		}
		return []string{one(n)}
	}
	touchesS3 := func(n *yaml.Node) bool {
		out, _ := yaml.Marshal(n)
		return strings.Contains(string(out), "s3:") || strings.Contains(string(out), "S3") ||
			strings.Contains(string(out), "dynamodb:") || strings.Contains(string(out), "DynamoDB")
	}
	var statements func(id string, n *yaml.Node) s3test.Policy
	statements = func(id string, n *yaml.Node) s3test.Policy {
		var pol s3test.Policy
		switch {
		case n.Kind == yaml.SequenceNode && n.Tag == "!If":
			if len(n.Content) != 3 {
				t.Fatalf("template.yaml line %d: !If without three arguments", n.Line)
			}
			if n.Content[0].Value == "HasBucket" || n.Content[0].Value == "HasPush" {
				return statements(id, n.Content[1])
			}
			if touchesS3(n) {
				t.Fatalf("template.yaml line %d: %s: S3 or DynamoDB statements under condition %s, which this test does not evaluate", n.Line, id, n.Content[0].Value)
			}
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i].Value, n.Content[i+1]
				switch {
				case k == "Statement":
					for _, st := range v.Content {
						pol = append(pol, statement(t, id, st, resolve)...)
					}
				case strings.HasPrefix(k, "S3"):
					t.Fatalf("template.yaml line %d: %s: SAM policy template %s: this test reads Statement entries only", v.Line, id, k)
				}
			}
		case n.Kind == yaml.ScalarNode && touchesS3(n):
			t.Fatalf("template.yaml line %d: %s: managed policy %q", n.Line, id, n.Value)
		}
		return pol
	}
	out := map[string]s3test.Policy{}
	resources := samtemplate.Get(doc, "Resources")
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		if typ := samtemplate.Get(res, "Type"); typ == nil || typ.Value != "AWS::Serverless::Function" {
			continue
		}
		var pol s3test.Policy
		if policies := samtemplate.Get(res, "Properties", "Policies"); policies != nil {
			for _, p := range policies.Content {
				pol = append(pol, statements(id, p)...)
			}
		}
		out[id] = pol
	}
	return out
}

// statement reads one IAM statement; only Allow statements with S3 or
// DynamoDB actions matter here (a Deny would need evaluating: it fails
// the test).
func statement(t *testing.T, id string, st *yaml.Node, resolve func(*yaml.Node) []string) s3test.Policy {
	if e := samtemplate.Get(st, "Effect"); e == nil || e.Value != "Allow" {
		t.Fatalf("template.yaml line %d: %s: a statement that is not Effect Allow", st.Line, id)
	}
	var s s3test.Statement
	for _, a := range resolve(samtemplate.Get(st, "Action")) {
		if strings.HasPrefix(a, "s3:") || strings.HasPrefix(a, "dynamodb:") {
			s.Actions = append(s.Actions, a)
		}
	}
	if len(s.Actions) == 0 {
		return nil
	}
	s.Resources = resolve(samtemplate.Get(st, "Resource"))
	if c := samtemplate.Get(st, "Condition"); c != nil {
		like := samtemplate.Get(c, "StringLike", "s3:prefix")
		if like == nil || len(c.Content) != 2 {
			t.Fatalf("template.yaml line %d: %s: a condition other than StringLike s3:prefix", c.Line, id)
		}
		s.PrefixLike = resolve(like)
	}
	return s3test.Policy{s}
}

// principalKey is the access key a function signs with in this test.
func principalKey(dir string) string { return "AKIATEST" + strings.ToUpper(dir) }

// TestLeastPrivilege runs each function with exactly the S3 and DynamoDB
// permissions template.yaml grants it (with push on, the upload function
// writes each commit's hint to the hint table): every function binary
// signs with an access key of its own, through a proxy that judges each
// S3 and DynamoDB call as IAM does
// (s3test.IAMProxy: the action of each API, DeleteObjects per key,
// CopyObject on source and target, presigned requests by their signer,
// a missing key 403 without s3:ListBucket). The flows of API.md go
// through it: a multipart form into the bucket, a presigned single PUT,
// an upload in parts cut, resumed and committed, an abort, content
// streamed, ranged and redirected, a file whose object is gone (404), an
// ack, and the sweep (acked files, then orphan marks). No call may be
// denied, and each flow answers as API.md says: the resume signs only the
// missing parts, a resume after an abort is 404, and the bucket is left
// with nothing (no staging copy, no incomplete multipart upload).
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	ep := s3test.MustStart(t)
	s3c, bucket := s3test.NewBucket(t, ep)
	ids := map[string]string{"upload": "Upload", "presign": "Presign", "list": "List", "content": "Content", "ack": "Ack", "sweep": "Sweep"}
	table, stream := s3test.NewStreamTable(t, ep, push.AttrID)
	byID := templatePolicies(t, bucket, table)
	policies := map[string]s3test.Policy{}
	for dir, id := range ids {
		pol, ok := byID[id]
		if !ok {
			t.Fatalf("template.yaml: no function %s", id)
		}
		policies[principalKey(dir)] = pol
	}
	proxy := s3test.StartIAMProxy(t, ep, policies)
	dbURL := knownDB(t)
	env := func(dir string) []string {
		e := append(dbEnv(dbURL), proxy.Endpoint().Env()...)
		if dir == "upload" { // the template gives the hint table to it alone
			e = append(e, "PUSH_HINT_TABLE="+table, "DYNAMODB_ENDPOINT="+proxy.URL)
		}
		return append(e, "AWS_ACCESS_KEY_ID="+principalKey(dir), "CONTENT_BUCKET="+bucket,
			"INLINE_MAX_BYTES=1024", "MULTIPART_THRESHOLD_BYTES=5242880", "MULTIPART_PART_BYTES=5242880")
	}
	upload, presign, content, ack, sweep := start(t, "upload", env("upload")...), start(t, "presign", env("presign")...),
		start(t, "content", env("content")...), start(t, "ack", env("ack")...), start(t, "sweep", env("sweep")...)
	ws := map[string]string{"workspaceId": workspacePlaceholder}
	jsonHeaders := map[string]string{"Content-Type": "application/json"}
	const uploadsPath, presignPath = "/workspaces/{workspaceId}/chat/uploads", "/workspaces/{workspaceId}/chat/uploads/presign"
	const contentPath = "/workspaces/{workspaceId}/pending-uploads/{fileId}/content"
	fileParams := func(id string) map[string]string {
		return map[string]string{"workspaceId": workspacePlaceholder, "fileId": id}
	}
	commit := func(uploadID string) stagedFile {
		t.Helper()
		var staged struct{ Files []stagedFile }
		wantJSON(t, invokeHTTP(t, upload, routeEvent(t, "POST", uploadsPath, ws, jsonHeaders,
			[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, uploadID)))), http.StatusOK, &staged)
		return staged.Files[0]
	}
	wantContent := func(f stagedFile, data []byte) {
		t.Helper()
		got := invokeHTTP(t, content, routeEvent(t, "GET", contentPath, fileParams(f.FileID), nil, nil))
		if got.StatusCode != http.StatusOK || string(responseBody(t, got)) != string(data) {
			t.Fatalf("content of %s: %d, %d bytes; want 200 and the %d bytes sent", f.Name, got.StatusCode, len(responseBody(t, got)), len(data))
		}
	}
	var files []stagedFile

	t.Run("MultipartForm", func(t *testing.T) {
		// A form's file above INLINE_MAX_BYTES goes to the bucket.
		data := randomFile(64 << 10)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		part, err := mw.CreateFormFile("files", "form.bin")
		if err != nil {
			t.Fatal(err)
		}
		part.Write(data)
		mw.Close()
		ev := routeEvent(t, "POST", uploadsPath, ws, map[string]string{"Content-Type": mw.FormDataContentType()}, nil)
		var m map[string]any
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatal(err)
		}
		m["body"], m["isBase64Encoded"] = base64.StdEncoding.EncodeToString(body.Bytes()), true
		ev, _ = json.Marshal(m)
		var staged struct{ Files []stagedFile }
		wantJSON(t, invokeHTTP(t, upload, ev), http.StatusOK, &staged)
		wantContent(staged.Files[0], data)
		files = append(files, staged.Files...)
	})
	t.Run("SinglePUT", func(t *testing.T) {
		data := randomFile(300 << 10)
		body := fmt.Sprintf(`{"files":[{"name":"one.bin","size":%d}]}`, len(data))
		var plan struct {
			Uploads []struct {
				UploadID string            `json:"upload_id"`
				URL      string            `json:"url"`
				Headers  map[string]string `json:"headers"`
			}
		}
		wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath, ws, jsonHeaders, []byte(body))), http.StatusOK, &plan)
		putPart(t, plan.Uploads[0].URL, plan.Uploads[0].Headers, data)
		f := commit(plan.Uploads[0].UploadID)
		wantContent(f, data)
		files = append(files, f)
	})
	t.Run("PartsCutResumedCommitted", func(t *testing.T) {
		data := randomFile(11<<20 + 3)
		var out struct{ Uploads []wire.PresignedUpload }
		body := fmt.Sprintf(`{"files":[{"name":"parts.bin","size":%d,"multipart":true}]}`, len(data))
		wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath, ws, jsonHeaders, []byte(body))), http.StatusOK, &out)
		p := out.Uploads[0].Multipart.Parts[0]
		putPart(t, p.URL, p.Headers, data[:p.Size])
		var resumed wire.PresignedUpload
		wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath+"/{uploadId}",
			map[string]string{"workspaceId": workspacePlaceholder, "uploadId": out.Uploads[0].UploadID.String()}, nil, nil)), http.StatusOK, &resumed)
		if r := resumed.Multipart; r == nil || len(r.Received) != 1 || r.Received[0].PartNumber != 1 || len(r.Parts) != 2 {
			t.Fatalf("resume: %+v, want part 1 received and parts 2, 3 signed", resumed.Multipart)
		}
		for _, p := range resumed.Multipart.Parts {
			off := int64(p.PartNumber-1) * (5 << 20)
			putPart(t, p.URL, p.Headers, data[off:off+p.Size])
		}
		f := commit(out.Uploads[0].UploadID.String())
		wantContent(f, data)
		files = append(files, f)
	})
	t.Run("Abort", func(t *testing.T) {
		for _, multipart := range []bool{false, true} {
			var out struct{ Uploads []wire.PresignedUpload }
			body := fmt.Sprintf(`{"files":[{"name":"gone.bin","size":%d,"multipart":%t}]}`, 6<<20, multipart)
			wantJSON(t, invokeHTTP(t, presign, routeEvent(t, "POST", presignPath, ws, jsonHeaders, []byte(body))), http.StatusOK, &out)
			upload := map[string]string{"workspaceId": workspacePlaceholder, "uploadId": out.Uploads[0].UploadID.String()}
			if multipart { // abandoned after its first part
				p := out.Uploads[0].Multipart.Parts[0]
				putPart(t, p.URL, p.Headers, randomFile(int(p.Size)))
			}
			res := invokeHTTP(t, presign, routeEvent(t, "DELETE", presignPath+"/{uploadId}", upload, nil, nil))
			var aborted wire.AbortAnswer
			if wantJSON(t, res, http.StatusOK, &aborted); !aborted.Aborted {
				t.Fatalf("abort (multipart %t): got %s, want aborted true", multipart, res.Body)
			}
			if multipart {
				again := invokeHTTP(t, presign, routeEvent(t, "POST", presignPath+"/{uploadId}", upload, nil, nil))
				if again.StatusCode != http.StatusNotFound {
					t.Errorf("resume after abort: got %d %s, want 404", again.StatusCode, again.Body)
				}
			}
		}
	})
	t.Run("ContentRangedAndRedirected", func(t *testing.T) {
		f := files[len(files)-1]
		ranged := invokeHTTP(t, content, routeEvent(t, "GET", contentPath, fileParams(f.FileID), map[string]string{"Range": "bytes=0-99"}, nil))
		if ranged.StatusCode != http.StatusPartialContent || len(responseBody(t, ranged)) != 100 {
			t.Errorf("range: got %d, %d bytes; want 206 and 100", ranged.StatusCode, len(responseBody(t, ranged)))
		}
		ev := routeEvent(t, "GET", contentPath, fileParams(f.FileID), nil, nil)
		var m map[string]any
		_ = json.Unmarshal(ev, &m)
		m["queryStringParameters"] = map[string]any{"redirect": "1"}
		m["multiValueQueryStringParameters"] = map[string]any{"redirect": []any{"1"}}
		ev, _ = json.Marshal(m)
		redirect := invokeHTTP(t, content, ev)
		if redirect.StatusCode != http.StatusTemporaryRedirect {
			t.Fatalf("redirect: got %d %s, want 307", redirect.StatusCode, redirect.Body)
		}
		res, err := http.Get(header(redirect, "Location")) // signed by the content function
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.ContentLength != f.Size {
			t.Errorf("the redirect's GET: got %d, %d bytes; want 200 and %d", res.StatusCode, res.ContentLength, f.Size)
		}
	})
	t.Run("ObjectGoneIs404", func(t *testing.T) {
		// The sweep deleted the object a moment before its row.
		f := files[1]
		key := "objects/" + workspacePlaceholder + "/" + f.FileID
		if _, err := s3c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		res := invokeHTTP(t, content, routeEvent(t, "GET", contentPath, fileParams(f.FileID), nil, nil))
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("content of a file whose object is gone: got %d %s, want 404", res.StatusCode, responseBody(t, res))
		}
	})
	t.Run("AckAndSweep", func(t *testing.T) {
		for _, f := range files {
			res := invokeHTTP(t, ack, routeEvent(t, "POST", "/workspaces/{workspaceId}/pending-uploads/{fileId}/ack", fileParams(f.FileID), nil, nil))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("ack %s: got %d %s", f.Name, res.StatusCode, res.Body)
			}
		}
		pool := openPool(t, dbURL)
		if _, err := pool.Exec(context.Background(), `UPDATE pending_uploads SET acked_at = now() - interval '1 day'`); err != nil {
			t.Fatal(err)
		}
		var swept struct{ Acked int }
		if err := json.Unmarshal(invoke(t, sweep, readEvent(t, "sweep")), &swept); err != nil || swept.Acked != len(files) {
			t.Fatalf("sweep: got %+v (%v), want %d acked", swept, err, len(files))
		}
		// Orphan marks are swept a minute after they are written: the
		// sweep's own code, with its key and a clock a minute ahead.
		ctx := context.Background()
		orphan := uuid.NewString()
		for _, k := range []string{"objects/" + workspacePlaceholder + "/" + orphan, "orphans/" + workspacePlaceholder + "/" + orphan} {
			if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
				t.Fatal(err)
			}
		}
		sweepClient := s3.New(s3.Options{Region: s3test.Region, BaseEndpoint: aws.String(proxy.URL), UsePathStyle: true,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: principalKey("sweep"), SecretAccessKey: s3test.SecretAccessKey}, nil
			})})
		store := pendinguploads.New(pool, s3blobs.NewFromClient(sweepClient, bucket), apptest.StoreSettings())
		store.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		if _, err := store.Sweep(ctx, time.Hour); err != nil {
			t.Fatalf("sweep of orphans: %v", err)
		}
		out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents { // staging copies included: a commit deletes its own
			t.Errorf("left in the bucket after the sweep: %s", aws.ToString(o.Key))
		}
		mu, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		if len(mu.Uploads) != 0 {
			t.Errorf("incomplete multipart uploads: got %d, want 0", len(mu.Uploads))
		}
	})
	for _, d := range proxy.Denied() {
		t.Errorf("denied as AWS would deny it: %s", d)
	}
	// Each commit's hint was written through the proxy, as the upload
	// function's dynamodb:PutItem on the hint table alone allows.
	if recs := streamEvent(t, stream); len(recs) < len(files) {
		t.Errorf("the hint table's stream holds %d records, want one per committed upload (%d at least)", len(recs), len(files))
	}
	if n := len(proxy.Decisions()); n < 20 {
		t.Errorf("the proxy judged %d S3 calls: the functions did not go through it", n)
	}
}
