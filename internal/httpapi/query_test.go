package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// state is everything a request could change: the rows of the tables it
// writes, the stamps of the files, and the bucket's keys.
func state(t *testing.T, srv *apptest.Server) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT count(*)::text FROM pending_uploads`,
		`SELECT count(*)::text FROM activity_logs`,
		`SELECT count(*)::text FROM presigned_uploads`,
		`SELECT count(*)::text FROM presigned_uploads WHERE file_id IS NOT NULL`,
		`SELECT coalesce(string_agg(file_id::text || coalesce(fetched_at::text, '-') || coalesce(acked_at::text, '-'), ',' ORDER BY file_id), '') FROM pending_uploads`,
	} {
		var v string
		if err := srv.Pool.QueryRow(context.Background(), q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		b.WriteString(v + ";")
	}
	out, err := s3test.NewClient(srv.S3).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	sort.Strings(keys)
	b.WriteString(strings.Join(keys, ","))
	return b.String()
}

// TestQueriesOnEveryRoute: on every route, a query that does not parse,
// names a parameter the route does not define, repeats one, or holds an
// empty pair ("?&") is 400 before anything happens: no row, no stamp, no
// object, no redirect. Only exactly redirect=1 may redirect.
func TestQueriesOnEveryRoute(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "1024",
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 << 20), "MULTIPART_PART_BYTES": fmt.Sprint(5 << 20)}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	inBucket := stage(t, srv, ws, "big.bin", "application/octet-stream", strings.Repeat("b", 4096))
	body, ctype := form(t, file("a.txt", "text/plain", "hello"))
	// A presigned upload whose object is in the bucket: its commit would
	// store a row.
	res := post(t, presignURL(srv, ws.String()), tok, "application/json", []byte(`{"files":[{"name":"p.bin","size":3}]}`))
	wantStatus(t, res, http.StatusOK)
	var pres presignAnswer
	decodeJSON(t, res.body, &pres)
	putObject(t, pres.Uploads[0].URL, pres.Uploads[0].Headers, []byte("abc"))
	commitBody := []byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, pres.Uploads[0].UploadID))
	// A multipart upload, for the resume and abort routes.
	parts := presignParts(t, srv, ws.String(), tok, 6<<20, nil)

	routes := []struct {
		name, method, url, ctype string
		body                     []byte
		param                    string // a parameter the route defines, to repeat
	}{
		{"Upload", "POST", uploadsURL(srv, ws.String()), ctype, body, ""},
		{"Commit", "POST", uploadsURL(srv, ws.String()), "application/json", commitBody, ""},
		{"Presign", "POST", presignURL(srv, ws.String()), "application/json", []byte(`{"files":[{"name":"q.bin","size":5}]}`), ""},
		{"List", "GET", listURL(srv, ws.String()), "", nil, "limit=1"},
		{"Content", "GET", contentURL(srv, ws.String(), inBucket.FileID), "", nil, "redirect=1"},
		{"Ack", "POST", ackURL(srv, ws.String(), inBucket.FileID), "", nil, ""},
		{"Resume", "POST", resumeURL(srv, ws.String(), parts.UploadID), "", nil, ""},
		{"Abort", "DELETE", resumeURL(srv, ws.String(), parts.UploadID), "", nil, ""},
		{"Limits", "GET", srv.URL + "/uploads/limits", "", nil, ""},
	}
	queries := []struct{ name, query string }{
		{"Unparseable", "x=%zz"},
		{"UnparseableKey", "%zz=1"},
		{"Semicolon", "a=1;b=2"},
		{"Unknown", "x=1"},
		{"UnknownBare", "x"},
		{"EmptyPair", "&"},
		{"EmptyPairs", "&&"},
		{"Repeated", ""},
	}
	for _, rt := range routes {
		for _, q := range queries {
			query := q.query
			if q.name == "Repeated" {
				query = "x=1&x=1"
				if rt.param != "" {
					query = rt.param + "&" + rt.param
				}
			}
			t.Run(rt.name+"/"+q.name, func(t *testing.T) {
				before := state(t, srv)
				req := newRequest(t, rt.method, rt.url+"?"+query, tok, rt.ctype, bytes.NewReader(rt.body))
				client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("?%s: status %d, want 400", query, resp.StatusCode)
				}
				if after := state(t, srv); after != before {
					t.Errorf("?%s changed something:\nbefore %s\nafter  %s", query, before, after)
				}
			})
		}
	}
	// And every route still does its work without a query: the requests
	// above were refused for their queries alone.
	for _, rt := range routes {
		req := newRequest(t, rt.method, rt.url, tok, rt.ctype, bytes.NewReader(rt.body))
		if res := send(t, req); res.status != http.StatusOK {
			t.Errorf("%s without a query: %d %s", rt.name, res.status, res.body)
		}
	}
}
