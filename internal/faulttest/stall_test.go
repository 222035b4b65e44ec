package faulttest_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/tcpproxy"
)

// headersOnly is a tcpproxy.Pipe that, once armed, lets through the
// head of the next answer the target sends (its status line and headers)
// and holds back everything after: S3 frozen between an object's headers
// and its bytes.
type headersOnly struct {
	target string
	armed  atomic.Bool
}

func (h *headersOnly) pipe(dst, src net.Conn) {
	fromTarget := src.RemoteAddr().String() == h.target
	buf := make([]byte, 32<<10)
	var head []byte // what this answer sent since arming, up to its blank line
	for {
		n, err := src.Read(buf)
		b := buf[:n]
		if fromTarget && n > 0 && h.armed.Load() {
			head = append(head, b...)
			if i := bytes.Index(head, []byte("\r\n\r\n")); i >= 0 {
				// The head goes through; the body never does, and
				// dst stays open (moto may end its side after the
				// answer): it ends when its reader gives up.
				_, _ = dst.Write(b[:n-(len(head)-(i+4))])
				for err == nil {
					_, err = src.Read(buf)
				}
				return
			}
		}
		if n > 0 {
			if _, werr := dst.Write(b); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			tcpproxy.End(dst, err)
			return
		}
	}
}

// TestS3StallsAfterHeaders: S3 answers a file's GET with its headers and
// then sends nothing (frozen between the two). The content route has
// answered nothing yet either, so API.md's promise holds: a 503 with the
// unavailable JSON, within the request's deadline. It was a connection
// closed without any answer after StreamIdleTimeout (15 s), which Go's
// client (and a browser) silently sends again: the caller waited 15 s
// plus the second request's 10 s (seen as TestS3Frozen's "answered 503
// after 25.104s" on a loaded machine, when the freeze fell between the
// two).
func TestS3StallsAfterHeaders(t *testing.T) {
	moto := s3test.MustStart(t)
	u, err := url.Parse(moto.URL)
	if err != nil {
		t.Fatal(err)
	}
	stall := &headersOnly{target: u.Host}
	proxy := tcpproxy.Start(t, "headersOnly", u.Host, stall.pipe)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"INLINE_MAX_BYTES": "1024",
		"S3_ENDPOINT":      proxy.URL(),
		"REQUEST_TIMEOUT":  "4s",
	}})
	ws := uuid.New()
	base := srv.URL + "/workspaces/" + ws.String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // one try per request
	body, ctype := faultkit.Multipart(faultkit.File{Name: "held.bin", Content: bytes.Repeat([]byte{'h'}, 4096)})
	res, err := faultkit.Do(client, reqTimeout, "POST", base+"/chat/uploads", srv.AdminToken, ctype, body)
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("upload: %d %s %v", res.Status, res.Body, err)
	}
	var staged stagedBody
	if err := json.Unmarshal(res.Body, &staged); err != nil || len(staged.Files) != 1 {
		t.Fatalf("upload body %s: %v", res.Body, err)
	}
	content := base + "/pending-uploads/" + staged.Files[0].FileID + "/content"
	if res, err := faultkit.Do(client, reqTimeout, "GET", content, srv.AdminToken, "", nil); err != nil || res.Status != http.StatusOK {
		t.Fatalf("content before the stall: %d %v", res.Status, err)
	}

	stall.armed.Store(true)
	res, err = faultkit.Do(client, reqTimeout, "GET", content, srv.AdminToken, "", nil)
	if err != nil {
		t.Fatalf("content while S3 stalls after the headers: no answer after %s (%v), want a 503", res.Elapsed.Round(time.Millisecond), err)
	}
	if res.Status != http.StatusServiceUnavailable {
		t.Fatalf("content while S3 stalls after the headers: %d %s, want 503", res.Status, res.Body)
	}
	if msg := faultkit.CheckUnavailable(res.Body); msg != "" {
		t.Errorf("503 body %s: %s", res.Body, msg)
	}
	t.Logf("503 after %s", res.Elapsed.Round(time.Millisecond))
}
