package functions_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// largestInline is the largest file the upload function takes inline
// under the default MAX_REQUEST_BYTES (4 MiB): the multipart body around
// it stays under the cap.
const largestInline = 4<<20 - 1024

// BenchmarkPeakRSS measures what a function process really holds for its
// largest inline case: the upload function staging a file of
// largestInline bytes (a 5.6 MB base64 event), and the content function
// serving it back (a 5.6 MB base64 answer). It reports the resident set
// after init and its high-water mark (VmHWM) after the invocation, in
// bytes and per byte of the file:
//
//	go test ./functions -run '^$' -bench PeakRSS -benchtime 3x
func BenchmarkPeakRSS(b *testing.B) {
	data := make([]byte, largestInline)
	rand.Read(data)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("files", "largest.bin")
	fw.Write(data)
	mw.Close()

	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(readEvent(b, "upload"), &ev); err != nil {
		b.Fatal(err)
	}
	for k := range ev.Headers {
		if strings.EqualFold(k, "content-type") || strings.EqualFold(k, "content-length") {
			delete(ev.Headers, k)
			delete(ev.MultiValueHeaders, k)
		}
	}
	ev.Headers["Content-Type"] = mw.FormDataContentType()
	ev.Headers["Content-Length"] = strconv.Itoa(body.Len())
	ev.MultiValueHeaders["Content-Type"] = []string{ev.Headers["Content-Type"]}
	ev.MultiValueHeaders["Content-Length"] = []string{ev.Headers["Content-Length"]}
	ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body.Bytes()), true
	uploadEvent, _ := json.Marshal(ev)

	for _, fn := range []string{"upload", "content"} {
		b.Run(fn, func(b *testing.B) {
			var after, peak int64
			for b.Loop() {
				env := dbEnv(pgtest.MustURL(b))
				var fileID string
				if fn == "content" {
					up := start(b, "upload", env...)
					var staged struct {
						Files []stagedFile `json:"files"`
					}
					wantJSON(b, invokeHTTP(b, up, uploadEvent), 200, &staged)
					fileID = staged.Files[0].FileID
					up.Stop()
				}
				rt := start(b, fn, env...)
				if err := rt.WaitInit(b.Context()); err != nil {
					b.Fatal(err)
				}
				after = max(after, vm(b, rt, "VmRSS"))
				event := uploadEvent
				if fn == "content" {
					event = withFileID(readEvent(b, "content"), fileID)
				}
				resp := invokeHTTP(b, rt, event)
				if resp.StatusCode != 200 {
					b.Fatalf("%s: status %d", fn, resp.StatusCode)
				}
				if fn == "content" && len(responseBody(b, resp)) != largestInline {
					b.Fatalf("content: wrong length")
				}
				peak = max(peak, vm(b, rt, "VmHWM"))
				rt.Stop()
			}
			b.ReportMetric(float64(after), "rss-after-init-B")
			b.ReportMetric(float64(peak), "peak-rss-B")
			b.ReportMetric(float64(peak)/largestInline, "peak-rss/file")
			b.ReportMetric(float64(peak-after)/largestInline, "growth/file")
		})
	}
}

// vm reads a size field (kB) of the process's /proc status, in bytes.
func vm(b testing.TB, rt *lambdatest.Runtime, field string) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", rt.Pid()))
	if err != nil {
		b.Skipf("no /proc status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc status", field)
	return 0
}
