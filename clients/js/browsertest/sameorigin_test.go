package browsertest

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/locals3"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestSameOriginCanvasUploadsThroughTheBucket: a canvas served on the
// API's own origin (the platform's edge routing the service's paths
// there: PUBLIC_ORIGIN, and no CORS origin at all) uploads a 30 MiB file
// through the client module in Chromium. Its presigned PUTs go to the
// bucket's host, another origin, so they need the bucket's CORS rule: the
// bucket here is made as template.yaml makes it for PublicOrigin alone
// (locals3.BucketOrigins, held to the template by deploytest), behind a
// proxy that answers browsers as S3 does without a rule, and the file
// must arrive byte for byte, its digest the service's word.
func TestSameOriginCanvasUploadsThroughTheBucket(t *testing.T) {
	chromium, node := requireBrowser(t)

	// The page's origin is the service's public origin, so the service is
	// configured after the page's server starts.
	var mux http.Handler
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(w, r) }))
	t.Cleanup(api.Close)
	same := canvasPages(t, api.URL)
	moto := s3test.MustStart(t)
	bucketURL, bucketName := s3AsToBrowsers(t, moto)
	service := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"S3_ENDPOINT":    bucketURL,
		"PUBLIC_ORIGIN":  same.URL,
		"MAX_FILE_BYTES": strconv.Itoa(largeFileBytes),
	}})
	mux = service.App.API.Mux()
	bucketName.Store(&service.Bucket)
	if err := locals3.CreateBucket(context.Background(), s3test.NewClient(service.S3), service.Bucket,
		locals3.BucketOrigins(nil, same.URL)); err != nil {
		t.Fatalf("the bucket as template.yaml makes it for PublicOrigin %s: %v", same.URL, err)
	}

	ws := uuid.New()
	file := fileSpec{Name: "same origin.bin", Size: largeFileBytes, Seed: 31, Type: "application/octet-stream"}
	res := drive(t, node, chromium, []step{
		{Name: "upload", Page: same.URL + "/page/index.html", Fn: "upload", Args: map[string]any{
			"api": "", "token": service.AdminToken, "ws": ws.String(), "files": []fileSpec{file}, "downloadMax": 0}},
	})
	up := res.Upload
	if !up.OK || len(up.Result.Files) != 1 {
		t.Fatalf("a same-origin page's %d MiB upload through the bucket: ok %v, error %+v", largeFileBytes>>20, up.OK, up.Error)
	}
	if f := up.Result.Files[0]; f.Size != int64(file.Size) || f.SHA256 != sha256Hex(pattern(file.Size, file.Seed)) {
		t.Errorf("staged %d bytes with sha256 %s, want %d bytes of the page's file", f.Size, f.SHA256, file.Size)
	}
}

// s3AsToBrowsers is a proxy in front of moto that answers browsers as S3
// does for a bucket without a CORS configuration: S3 refuses its
// preflights (403, "CORS is not enabled for this bucket") and puts no
// Access-Control-* header on an answer, where moto's server allows every
// origin. A bucket with a configuration is moto's to judge by its rules.
// The bucket is the one whose name is stored in the returned pointer
// (set once the service has made it).
func s3AsToBrowsers(t *testing.T, moto s3test.Endpoint) (string, *atomic.Pointer[string]) {
	t.Helper()
	u, err := url.Parse(moto.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := s3test.NewClient(moto)
	var bucket atomic.Pointer[string]
	noRule := func(r *http.Request) bool {
		name := bucket.Load()
		if r.Header.Get("Origin") == "" || name == nil || !strings.HasPrefix(r.URL.Path, "/"+*name+"/") {
			return false
		}
		_, err := client.GetBucketCors(r.Context(), &s3.GetBucketCorsInput{Bucket: name})
		return err != nil
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if noRule(resp.Request) {
			for k := range resp.Header {
				if strings.HasPrefix(http.CanonicalHeaderKey(k), "Access-Control-") {
					resp.Header.Del(k)
				}
			}
		}
		return nil
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && noRule(r) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<Error><Code>AccessForbidden</Code><Message>CORSResponse: CORS is not enabled for this bucket.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL, &bucket
}
