package push_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/push"
)

// iotAt is an IoT publisher to a loopback stand-in of IoT Core's data
// endpoint.
func iotAt(t *testing.T, srv *httptest.Server) *push.IoT {
	t.Helper()
	p, err := push.NewIoT(strings.TrimPrefix(srv.URL, "http://"), aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	p.Scheme = "http"
	return p
}

// TestPushIoTPublishRequest: a hint goes to IoT Core's HTTPS Publish as
// the iot-data API takes it: POST /topics/<topic, escaped>?qos=0 with the
// hint as its body, signed with SigV4 for iotdevicegateway in the
// function's region.
func TestPushIoTPublishRequest(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got, body = r, must(io.ReadAll(r.Body))
		_, _ = io.WriteString(w, `{"message":"OK","traceId":"x"}`)
	}))
	defer srv.Close()
	ws, file := uuid.New(), uuid.New()
	h := &push.Hints{Publisher: iotAt(t, srv)}
	h.Notify(context.Background(), ws, []uuid.UUID{file})
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		t.Fatal("no publish request")
	}
	wantPath := "/topics/pendinguploads%2F" + ws.String() + "%2Fuploads"
	if got.Method != http.MethodPost || got.URL.EscapedPath() != wantPath || got.URL.RawQuery != "qos=0" {
		t.Errorf("request: got %s %s?%s, want POST %s?qos=0", got.Method, got.URL.EscapedPath(), got.URL.RawQuery, wantPath)
	}
	if auth := got.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") ||
		!strings.Contains(auth, "/us-east-1/iotdevicegateway/aws4_request") {
		t.Errorf("Authorization: got %q, want SigV4 for iotdevicegateway in us-east-1", auth)
	}
	if want := `{"workspace_id":"` + ws.String() + `","file_ids":["` + file.String() + `"]}`; string(body) != want {
		t.Errorf("body: got %s, want %s", body, want)
	}
}

// TestPushHintIsBoundedAndNeverFails: a publish that hangs is given up
// after the timeout, and one IoT Core refuses is logged: Notify returns
// either way, with nothing for the caller to fail on.
func TestPushHintIsBoundedAndNeverFails(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"throttled"}`, http.StatusTooManyRequests)
	}))
	defer refuse.Close()

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	h := &push.Hints{Publisher: iotAt(t, hang), Timeout: 300 * time.Millisecond, Logger: log}
	start := time.Now()
	h.Notify(context.Background(), uuid.New(), []uuid.UUID{uuid.New()})
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("a hanging publish: Notify returned after %s, want about its 300ms timeout", d)
	}
	h = &push.Hints{Publisher: iotAt(t, refuse), Logger: log}
	h.Notify(context.Background(), uuid.New(), []uuid.UUID{uuid.New()})
	if n := strings.Count(logs.String(), "upload hint not published"); n != 2 {
		t.Errorf("logged %d failed hints, want 2:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "429") {
		t.Errorf("the refusal's status is not in the log:\n%s", logs.String())
	}
	// A cancelled request still sends its hint (the rows committed).
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logs.Reset()
	(&push.Hints{Publisher: iotAt(t, ok), Logger: log}).Notify(ctx, uuid.New(), []uuid.UUID{uuid.New()})
	if logs.Len() != 0 {
		t.Errorf("a hint of a cancelled request was not sent:\n%s", logs.String())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
