package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/internal/testkit/throttle"
)

const (
	// maxUploadBytes is the canvas's MAX_UPLOAD_BYTES, and the service's
	// MAX_FILE_BYTES in this test.
	maxUploadBytes = 100 << 20
	// cutLinkRate is the throttled link of the reload case, per
	// connection (testkit/throttle between the bucket's proxy and moto):
	// slow enough that the page is reloaded while parts travel.
	cutLinkRate = 16 << 20
	// reloadAfterParts: the page is reloaded once the bucket holds this
	// many of the 13 parts (48 MiB of 100), so at most 52 % travels again.
	reloadAfterParts = 6
	// measureLinkRate is TestCanvasPartsInFlight's link, per connection:
	// slow enough that the link, not the two shared cores, bounds it.
	measureLinkRate = 4 << 20
	// stallLimit is the stall case's stallTimeoutMs: it bounds only its
	// PUTs, which the bucket side holds with no byte read.
	stallLimit = 500 * time.Millisecond
	// timeoutSignalAfter is the timeout signal case's AbortSignal.timeout:
	// it bounds the whole upload, so that the presign is answered before
	// it on a loaded machine, and only the stalled PUT is cut.
	timeoutSignalAfter = 1500 * time.Millisecond
)

// bucketSide is a proxy in front of moto that watches what the browser
// sends the bucket, per workspace (the staging key's): part PUTs in
// flight at once, the bytes of each PUT that reached moto and what moto
// stored, before and after the service is asked to resume (phase 0, 1).
// A throttled workspace's PUTs go to moto through testkit/throttle; a
// workspace in outage has every browser PUT answered 503; a stalled one's
// PUTs are held, their bytes never read. It counts the browser's
// requests that carry a credential of the service's (a Cookie, an
// Authorization, the tenant header), or ask in a preflight to send one.
type bucketSide struct {
	URL string

	mu        sync.Mutex
	throttled map[uuid.UUID]bool
	outage    map[uuid.UUID]bool
	stalled   map[uuid.UUID]bool
	resumed   map[uuid.UUID]bool
	// received is, per workspace, the parts the service's last resume
	// answer said the bucket holds: the bucket's own word (ListParts).
	received map[uuid.UUID]map[int]int64
	ws       map[uuid.UUID]*wsPuts
	leaks    []string
	held     []net.Conn
}

// wsPuts is what one workspace's browser PUTs did.
type wsPuts struct {
	// PUTs in flight, by the phase they began in: the PUTs a reload cut
	// may still be draining at the proxy when the reloaded page's begin.
	inFlight, maxInFlight [2]int
	puts, refused         int
	bytes                 [2]int64
	stored                [2]map[int]bool // part number (0: a single PUT) → stored
}

// most is the most PUTs in flight at once, in either phase.
func (p wsPuts) most() int { return max(p.maxInFlight[0], p.maxInFlight[1]) }

var stagingWS = regexp.MustCompile(`/staging/([0-9a-f-]{36})/`)

// storedKey holds, in a PUT's context, where the proxy notes that moto
// answered it 2xx: moto's word, even when the browser is gone by then
// (a reload) and never reads the answer.
type storedKey struct{}

func startBucketSide(t *testing.T, moto string, rate int64) *bucketSide {
	t.Helper()
	u, err := url.Parse(moto)
	if err != nil {
		t.Fatal(err)
	}
	b := &bucketSide{throttled: map[uuid.UUID]bool{}, outage: map[uuid.UUID]bool{}, stalled: map[uuid.UUID]bool{},
		resumed: map[uuid.UUID]bool{}, received: map[uuid.UUID]map[int]int64{}, ws: map[uuid.UUID]*wsPuts{}}
	direct := httputil.NewSingleHostReverseProxy(u)
	slow := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: throttle.Start(t, u.Host, rate).Addr})
	for _, rp := range []*httputil.ReverseProxy{direct, slow} {
		rp.ErrorLog = log.New(io.Discard, "", 0) // cut PUTs are expected
		rp.ModifyResponse = func(resp *http.Response) error {
			if ok, _ := resp.Request.Context().Value(storedKey{}).(*atomic.Bool); ok != nil && resp.StatusCode/100 == 2 {
				ok.Store(true)
			}
			return nil
		}
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" { // the service's own calls, signed by the SDK
			direct.ServeHTTP(w, r)
			return
		}
		b.checkLeaks(r)
		m := stagingWS.FindStringSubmatch(r.URL.Path)
		if r.Method != http.MethodPut || m == nil {
			direct.ServeHTTP(w, r)
			return
		}
		ws := uuid.MustParse(m[1])
		part, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
		b.mu.Lock()
		p := b.ws[ws]
		if p == nil {
			p = &wsPuts{stored: [2]map[int]bool{{}, {}}}
			b.ws[ws] = p
		}
		phase := 0
		if b.resumed[ws] {
			phase = 1
		}
		outage, stalled, throttled := b.outage[ws], b.stalled[ws], b.throttled[ws]
		p.puts++
		if outage || stalled {
			p.refused++
		}
		b.mu.Unlock()
		switch {
		case outage:
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<Error><Code>ServiceUnavailable</Code><Message>storage down</Message></Error>")
			return
		case stalled:
			// The connection stays open and unread until the test ends:
			// no byte moves.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				b.mu.Lock()
				b.held = append(b.held, conn)
				b.mu.Unlock()
			}
			return
		}
		b.mu.Lock()
		p.inFlight[phase]++
		p.maxInFlight[phase] = max(p.maxInFlight[phase], p.inFlight[phase])
		b.mu.Unlock()
		body := &countingBody{ReadCloser: r.Body}
		stored := &atomic.Bool{}
		r = r.WithContext(context.WithValue(r.Context(), storedKey{}, stored))
		r.Body = body
		if throttled {
			slow.ServeHTTP(w, r)
		} else {
			direct.ServeHTTP(w, r)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		p.inFlight[phase]--
		p.bytes[phase] += body.n.Load()
		if stored.Load() {
			p.stored[phase][part] = true
		}
	}))
	t.Cleanup(func() {
		b.mu.Lock()
		for _, c := range b.held {
			c.Close()
		}
		b.mu.Unlock()
		s.Close()
	})
	b.URL = s.URL
	return b
}

// checkLeaks notes a browser request to the bucket that carries, or asks
// to carry, what only the service may get.
func (b *bucketSide) checkLeaks(r *http.Request) {
	var found []string
	for _, h := range []string{"Cookie", "Authorization", "X-Molecule-Org-Slug"} {
		if r.Header.Get(h) != "" {
			found = append(found, h)
		}
	}
	if asked := strings.ToLower(r.Header.Get("Access-Control-Request-Headers")); asked != "" {
		for _, h := range []string{"cookie", "authorization", "x-molecule-org-slug"} {
			if strings.Contains(asked, h) {
				found = append(found, "preflight asks for "+h)
			}
		}
	}
	if len(found) > 0 {
		b.mu.Lock()
		b.leaks = append(b.leaks, fmt.Sprintf("%s %s: %s", r.Method, r.URL.Path, strings.Join(found, ", ")))
		b.mu.Unlock()
	}
}

func (b *bucketSide) set(m map[uuid.UUID]bool, ws uuid.UUID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m[ws] = true
}

// storedParts is how many of ws's parts moto stored so far, both phases.
func (b *bucketSide) storedParts(ws uuid.UUID) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.ws[ws]
	if p == nil {
		return 0
	}
	return len(p.stored[0]) + len(p.stored[1])
}

func (b *bucketSide) puts(ws uuid.UUID) wsPuts {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.ws[ws]; p != nil {
		return *p
	}
	return wsPuts{}
}

// serviceCall is one request from the page that reached the service.
type serviceCall struct {
	method, path                      string
	slug, authorization, cookie, site string
}

type serviceCalls struct {
	mu    sync.Mutex
	calls []serviceCall
}

func (c *serviceCalls) wrap(origin string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == origin && r.Method != http.MethodOptions {
			c.mu.Lock()
			c.calls = append(c.calls, serviceCall{r.Method, r.URL.Path, r.Header.Get("X-Molecule-Org-Slug"),
				r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Header.Get("Sec-Fetch-Site")})
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *serviceCalls) all() []serviceCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]serviceCall(nil), c.calls...)
}

// canvasRig is the service with a bucket on moto behind a bucketSide,
// the canvas's origin (testdata/canvas, the client module under /page/,
// and the bucket side's count of stored parts at /test/stored), and the
// service's origin, which notes the canvas's calls and tells the bucket
// side when a workspace's upload is resumed.
type canvasRig struct {
	page, api *httptest.Server
	srv       *apptest.Server
	bucket    *bucketSide
	calls     *serviceCalls
}

// startCanvasRig starts it, with env's settings (the control plane's)
// added to the service's, and rate the throttled workspaces' link.
func startCanvasRig(t *testing.T, env map[string]string, rate int64) canvasRig {
	t.Helper()
	moto := s3test.MustStart(t)
	bucket := startBucketSide(t, moto.URL, rate)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join("testdata", "canvas"))))
	mux.Handle("/page/", http.StripPrefix("/page/", http.FileServer(http.Dir(filepath.Join("testdata", "page")))))
	serveClient(t, mux, "/page/")
	mux.HandleFunc("/test/stored", func(w http.ResponseWriter, r *http.Request) {
		ws, err := uuid.Parse(r.URL.Query().Get("ws"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"stored": bucket.storedParts(ws)})
	})
	page := httptest.NewServer(mux)
	t.Cleanup(page.Close)

	env["S3_ENDPOINT"] = bucket.URL
	env["CORS_ALLOWED_ORIGINS"] = page.URL
	env["MAX_FILE_BYTES"] = strconv.Itoa(maxUploadBytes)
	env["WORKSPACE_MAX_PENDING_FILES"] = "64"
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: env})
	s3c := s3test.NewClient(srv.S3)
	if _, err := s3c.PutBucketCors(context.Background(), &s3.PutBucketCorsInput{
		Bucket: aws.String(srv.Bucket),
		CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
			AllowedMethods: []string{"PUT", "GET"}, AllowedOrigins: []string{page.URL},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(3600),
		}}},
	}); err != nil {
		t.Fatalf("bucket CORS: %v", err)
	}
	calls := &serviceCalls{}
	appMux := srv.App.API.Mux()
	api := httptest.NewServer(calls.wrap(page.URL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := uuid.Parse(strings.Split(r.URL.Path+"//", "/")[2])
		if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/chat/uploads/presign/") || err != nil {
			appMux.ServeHTTP(w, r)
			return
		}
		// A resume: the bucket side's phase 1 begins, and its answer says
		// which parts the bucket holds.
		bucket.set(bucket.resumed, ws)
		rec := httptest.NewRecorder()
		appMux.ServeHTTP(rec, r)
		var plan struct {
			Multipart struct {
				Received []struct {
					PartNumber int   `json:"part_number"`
					Size       int64 `json:"size"`
				} `json:"received"`
			} `json:"multipart"`
		}
		if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &plan) == nil {
			got := map[int]int64{}
			for _, p := range plan.Multipart.Received {
				got[p.PartNumber] = p.Size
			}
			bucket.mu.Lock()
			bucket.received[ws] = got
			bucket.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})))
	t.Cleanup(api.Close)
	return canvasRig{page: page, api: api, srv: srv, bucket: bucket, calls: calls}
}

// dropInResult is what the page's send returns.
type dropInResult struct {
	OK          bool    `json:"ok"`
	MS          float64 `json:"ms"`
	Error       *struct{ Name, Code, Message string }
	Sentence    string `json:"sentence"`
	Attachments []struct {
		URI      string `json:"uri"`
		Name     string `json:"name"`
		MimeType string `json:"mimeType"`
		Size     int64  `json:"size"`
	} `json:"attachments"`
	Progress struct {
		Count     int                            `json:"count"`
		Backwards bool                           `json:"backwards"`
		First     *struct{ Loaded, Total int64 } `json:"first"`
		Last      *struct{ Loaded, Total int64 } `json:"last"`
		// FirstMS is when the first bytes moved, from the call.
		FirstMS float64 `json:"firstMs"`
	} `json:"progress"`
	Before, After []struct {
		Status int    `json:"status"`
		Size   int64  `json:"size"`
		Type   string `json:"type"`
		Same   bool   `json:"same"`
		Error  string `json:"error"`
	}
	Acked  []bool  `json:"acked"`
	StepMS float64 `json:"stepMs"`
	// sendUntil's
	Stored int `json:"stored"`
}

// TestCanvasDropIn runs the canvas's own calling code with README's
// drop-in (testdata/canvas/dropin.js: its gate, platformAuthHeaders(),
// credentials "include", its sentences, its attachment download) in
// Chromium, against the service with a bucket on moto and MAX_FILE_BYTES
// 100 MiB, in the production canvas's session mode (the control plane's
// cookie and X-Molecule-Org-Slug, cross-origin) and in local
// development's bearer mode (the bearer in the canvas's headers, still
// credentials "include"). Each message (in session mode one file of 1 or
// 4.5 MiB, or three small files and one of 20 MiB; in bearer mode the 4.5
// MiB one and the mixed one: each way to the service once) is
// uploaded, its attachments opened the canvas's way and compared byte for
// byte, acked, and opened and compared again; progress never goes back,
// at most four parts travel at once, and the bucket never sees the
// service's credentials. A 100 MiB file (MAX_UPLOAD_BYTES, 13 parts) over
// a throttled link is cut by a page reload and resumed, sending again at
// most the parts the bucket lacked (at most 60 % of the file), 2 to 4
// parts at once, and is opened byte for byte as the others: the largest
// file, and a message of one file in parts, once. A file over the gate is
// the canvas's own
// FileTooLargeError before any request; a full workspace, a bucket
// answering 503, a bucket that takes no byte, and the canvas's own
// AbortSignal.timeout kept by a caller each reach the person as the
// canvas's sentence within a bounded time.
func TestCanvasDropIn(t *testing.T) {
	chromium, node := requireBrowser(t)
	start := time.Now()
	cp := cptest.Start(t, tenantSlug)
	const member = "dropin-session-0123456789"
	cp.AddMember(member, "user-dropin")
	rig := startCanvasRig(t, cp.Env(), cutLinkRate)
	page, api, srv, bucket, calls := rig.page, rig.api, rig.srv, rig.bucket, rig.calls
	if srv.Store.PartBytes != 8<<20 || srv.Store.MultipartThreshold != 16<<20 {
		t.Fatalf("the service's multipart settings: threshold %d, parts of %d; the test assumes the defaults (16 MiB, 8 MiB)",
			srv.Store.MultipartThreshold, srv.Store.PartBytes)
	}

	type message struct {
		name  string
		files []fileSpec
	}
	mib := func(n float64) int { return int(n * (1 << 20)) }
	messages := []message{
		{"1MiB", []fileSpec{{Name: "notes.txt", Size: mib(1), Seed: 21, Type: "text/plain"}}},
		{"4.5MiB", []fileSpec{{Name: "photo.jpg", Size: mib(4.5), Seed: 22, Type: "image/jpeg"}}},
		{"mixed", []fileSpec{
			{Name: "a.txt", Size: 10 << 10, Seed: 26, Type: "text/plain"},
			{Name: "b.png", Size: 700 << 10, Seed: 27, Type: "image/png"},
			{Name: "c.csv", Size: mib(2), Seed: 28, Type: "text/csv"},
			{Name: "d.zip", Size: mib(20), Seed: 29, Type: "application/zip"},
		}},
	}
	type mode struct {
		name     string
		slug     string
		token    string
		cookies  []map[string]string
		messages []message
	}
	modes := []mode{
		{"session", tenantSlug, "", []map[string]string{{"name": cptest.CookieName, "value": member, "url": page.URL}}, messages},
		// One PUT of its own, and the mixed message: inline files and
		// one in parts.
		{"bearer", "", srv.AdminToken, []map[string]string{}, []message{messages[1], messages[2]}},
	}
	type sent struct {
		mode mode
		msg  message
		ws   uuid.UUID
	}
	var steps []step
	var cases []sent
	wsMode := map[uuid.UUID]string{}
	args := func(m mode, ws uuid.UUID, files []fileSpec, extra map[string]any) map[string]any {
		a := map[string]any{"api": api.URL, "slug": m.slug, "token": m.token, "ws": ws.String(), "files": files}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, m := range modes {
		for _, msg := range m.messages {
			ws := uuid.New()
			wsMode[ws] = m.name
			cases = append(cases, sent{m, msg, ws})
			steps = append(steps, step{Name: m.name + "/" + msg.name, Page: page.URL + "/dropin.html", Fn: "send",
				Args: args(m, ws, msg.files, nil), Cookies: m.cookies})
		}
	}
	session, bearer := modes[0], modes[1]

	// The reload: the same 100 MiB File (its lastModified too) before and
	// after, over the throttled link.
	wsCut := uuid.New()
	wsMode[wsCut] = session.name
	bucket.set(bucket.throttled, wsCut)
	big := []fileSpec{{Name: "long take.mov", Size: maxUploadBytes, Seed: 30, Type: "video/quicktime", LastModified: 1_767_225_600_000}}
	steps = append(steps, step{Name: "cut", Page: page.URL + "/dropin.html", Fn: "sendUntil",
		Args:    args(session, wsCut, big, map[string]any{"parts": reloadAfterParts, "control": page.URL + "/test/stored"}),
		Cookies: session.cookies, Reload: &reloadStep{Name: "resumed", Fn: "send", Args: args(session, wsCut, big, nil)}})

	// The refusals.
	wsGate, wsFull, wsOutage, wsStall, wsTimeout := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	wsMode[wsGate], wsMode[wsFull], wsMode[wsOutage], wsMode[wsStall], wsMode[wsTimeout] = session.name, session.name, bearer.name, bearer.name, bearer.name
	full := make([]pendinguploads.File, 64)
	for i := range full {
		full[i] = pendinguploads.File{Content: []byte("x"), Filename: "waiting.txt"}
	}
	if _, err := srv.Store.Stage(context.Background(), auth.AdminIdentity(), wsFull, full); err != nil {
		t.Fatal(err)
	}
	bucket.set(bucket.outage, wsOutage)
	bucket.set(bucket.stalled, wsStall)
	bucket.set(bucket.stalled, wsTimeout)
	steps = append(steps,
		step{Name: "gate", Page: page.URL + "/dropin.html", Fn: "send", Cookies: session.cookies,
			Args: args(session, wsGate, []fileSpec{{Name: "too big.bin", Size: maxUploadBytes + 1, Zeros: true}}, nil)},
		step{Name: "quota", Page: page.URL + "/dropin.html", Fn: "send", Cookies: session.cookies,
			Args: args(session, wsFull, []fileSpec{{Name: "one more.zip", Size: mib(20), Seed: 31}}, nil)},
		step{Name: "outage", Page: page.URL + "/dropin.html", Fn: "send", Cookies: bearer.cookies,
			Args: args(bearer, wsOutage, []fileSpec{{Name: "photo.jpg", Size: mib(4.5), Seed: 32}}, nil)},
		step{Name: "stall", Page: page.URL + "/dropin.html", Fn: "send", Cookies: bearer.cookies,
			Args: args(bearer, wsStall, []fileSpec{{Name: "photo.jpg", Size: mib(4.5), Seed: 33}},
				map[string]any{"stallTimeoutMs": stallLimit.Milliseconds()})},
		// A caller that keeps the canvas's AbortSignal.timeout: it fires
		// long before the default stall limit (a minute).
		step{Name: "timeoutSignal", Page: page.URL + "/dropin.html", Fn: "send", Cookies: bearer.cookies,
			Args: args(bearer, wsTimeout, []fileSpec{{Name: "photo.jpg", Size: mib(4.5), Seed: 34}},
				map[string]any{"timeoutSignalMs": timeoutSignalAfter.Milliseconds()})},
	)

	var raw map[string]json.RawMessage
	decodeSteps(t, driveSteps(t, node, chromium, steps), &raw)
	res := map[string]dropInResult{}
	for k, v := range raw {
		if k == "userAgent" {
			continue
		}
		var r dropInResult
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatalf("step %s: %v\n%s", k, err, v)
		}
		res[k] = r
	}

	for _, c := range cases {
		t.Run(c.mode.name+"/"+c.msg.name, func(t *testing.T) {
			r := res[c.mode.name+"/"+c.msg.name]
			if !r.OK {
				t.Fatalf("the canvas's upload: %+v: %q", r.Error, r.Sentence)
			}
			var total int64
			for _, f := range c.msg.files {
				total += int64(f.Size)
			}
			t.Logf("%d bytes uploaded in %.0f ms; the step took %.0f ms", total, r.MS, r.StepMS)
			checkAttachments(t, c.ws, c.msg.files, r)
			checkProgress(t, r, 0, total)
			if n := count(t, srv, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NOT NULL`, c.ws); n != len(c.msg.files) {
				t.Errorf("acked rows: %d, want %d", n, len(c.msg.files))
			}
			p := bucket.puts(c.ws)
			// Several at once, for a file of more parts than that:
			// ReloadResumes's 100 MiB one.
			if p.most() > 4 {
				t.Errorf("PUTs to the bucket in flight at once: %d, want at most 4", p.most())
			}
		})
	}

	t.Run("ReloadResumes", func(t *testing.T) {
		cut, r := res["cut"], res["resumed"]
		if !cut.OK {
			t.Fatalf("the upload before the reload: %+v", cut.Error)
		}
		if !r.OK {
			t.Fatalf("the upload after the reload: %+v: %q", r.Error, r.Sentence)
		}
		p := bucket.puts(wsCut)
		bucket.mu.Lock()
		received := bucket.received[wsCut]
		bucket.mu.Unlock()
		var held int64
		for _, size := range received {
			held += size
		}
		again := p.bytes[1]
		t.Logf("reloaded %.0f ms in, %d parts stored then; the resume found %d parts (%d bytes) in the bucket; after it %d bytes sent (%.1f %% of the file) in %.0f ms; at most %v parts in flight before and after",
			cut.MS, cut.Stored, len(received), held, again, 100*float64(again)/maxUploadBytes, r.MS, p.maxInFlight)
		if len(received) < reloadAfterParts || held >= maxUploadBytes {
			t.Fatalf("the resume found %d parts in the bucket; want %d or more, not all", len(received), reloadAfterParts)
		}
		if again != maxUploadBytes-held {
			t.Errorf("bytes sent after the reload: %d, want exactly the %d the bucket lacked", again, maxUploadBytes-held)
		}
		if again > maxUploadBytes*6/10 {
			t.Errorf("bytes sent after the reload: %d, more than 60 %% of the file", again)
		}
		if p.maxInFlight[0] > 4 || p.maxInFlight[1] > 4 || p.most() < 2 {
			t.Errorf("parts in flight at once, before and after the reload: %v, want 2 to 4", p.maxInFlight)
		}
		checkAttachments(t, wsCut, big, r)
		checkProgress(t, r, held, maxUploadBytes)
	})

	t.Run("GateBeforeAnyRequest", func(t *testing.T) {
		r := res["gate"]
		if r.OK || r.Error == nil || r.Error.Name != "FileTooLargeError" || r.Sentence != "too big.bin is 100.0MB; files can be at most 100MB" {
			t.Errorf("a file over MAX_UPLOAD_BYTES: %+v %q, want the canvas's FileTooLargeError", r.Error, r.Sentence)
		}
		for _, c := range calls.all() {
			if strings.Contains(c.path, wsGate.String()) {
				t.Errorf("a request reached the service for a file over the gate: %s %s", c.method, c.path)
			}
		}
	})

	refusals := []struct {
		name, step string
		ws         uuid.UUID
		within     time.Duration
		errName    string
		sentence   string
	}{
		{"QuotaRefusal", "quota", wsFull, 10 * time.Second, "PendingUploadsError",
			"Upload failed: the workspace has 64 files waiting, and this upload (1 file) would pass its limit of 64 files; it takes more once the workspace fetches and acknowledges what waits"},
		{"BucketOutage", "outage", wsOutage, 15 * time.Second, "PendingUploadsError",
			"Upload failed: the file storage is unavailable right now (503 ServiceUnavailable); try again in a moment [put photo.jpg]"},
		// Three attempts of stallLimit each, and the backoff between them.
		{"StalledTransfer", "stall", wsStall, 4*stallLimit + 5*time.Second, "TimeoutError",
			"Upload timed out — your connection is too slow for this file…"},
		{"TimeoutSignal", "timeoutSignal", wsTimeout, timeoutSignalAfter + 5*time.Second, "TimeoutError",
			"Upload timed out — your connection is too slow for this file…"},
	}
	for _, rf := range refusals {
		t.Run(rf.name, func(t *testing.T) {
			r := res[rf.step]
			if r.OK || r.Error == nil {
				t.Fatalf("want a failure, got %+v", r)
			}
			took := time.Duration(r.MS * float64(time.Millisecond))
			t.Logf("%s after %s: %q", r.Error.Name, took.Round(time.Millisecond), r.Sentence)
			if r.Error.Name != rf.errName || r.Sentence != rf.sentence {
				t.Errorf("got %s %q, want %s %q", r.Error.Name, r.Sentence, rf.errName, rf.sentence)
			}
			if took > rf.within {
				t.Errorf("the person waited %s for it, want at most %s", took, rf.within)
			}
			if rows, _ := rowsOf(t, srv, rf.ws); rf.ws != wsFull && rows != 0 {
				t.Errorf("rows stored: %d, want none", rows)
			}
		})
	}
	t.Run("StallRetried", func(t *testing.T) {
		if p := bucket.puts(wsStall); p.refused != 3 {
			t.Errorf("PUTs held without a byte read: %d, want 3 (the default attempts)", p.refused)
		}
		// The aborted upload is dropped on the service, as any abort is.
		if r := res["timeoutSignal"]; r.Error == nil || r.Error.Code != "aborted" {
			t.Errorf("an upload ended by AbortSignal.timeout: %+v, want code aborted (named TimeoutError)", r.Error)
		}
		if n := count(t, srv, `SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1`, wsTimeout); n != 0 {
			t.Errorf("presigned uploads left after the timeout signal: %d", n)
		}
	})

	t.Run("ServiceGetsTheCanvasHeaders", func(t *testing.T) {
		n := map[string]int{}
		for _, c := range calls.all() {
			m := "limits"
			if strings.HasPrefix(c.path, "/workspaces/") {
				ws, err := uuid.Parse(strings.Split(c.path, "/")[2])
				if err != nil {
					t.Errorf("%s %s: no workspace", c.method, c.path)
					continue
				}
				m = wsMode[ws]
			}
			n[m]++
			session := c.slug == tenantSlug && c.cookie != "" && c.authorization == ""
			bearer := c.slug == "" && c.authorization == "Bearer "+srv.AdminToken && c.cookie == ""
			if (m == "session" && !session) || (m == "bearer" && !bearer) || (m == "limits" && !session && !bearer) {
				t.Errorf("%s %s (%s mode): slug %q, Authorization %t, Cookie %t", c.method, c.path, m, c.slug, c.authorization != "", c.cookie != "")
			}
		}
		t.Logf("requests from the canvas to the service: %v", n)
		if n["session"] == 0 || n["bearer"] == 0 || n["limits"] == 0 {
			t.Errorf("requests seen by mode: %v", n)
		}
	})
	t.Run("BucketGetsNoneOfThem", func(t *testing.T) {
		bucket.mu.Lock()
		defer bucket.mu.Unlock()
		for _, l := range bucket.leaks {
			t.Errorf("to the bucket: %s", l)
		}
	})
	t.Logf("wall time: %s", time.Since(start).Round(time.Millisecond))
}

// checkAttachments checks the canvas's attachments against files: its
// shape, and each opened byte for byte before and after its ack.
func checkAttachments(t *testing.T, ws uuid.UUID, files []fileSpec, r dropInResult) {
	t.Helper()
	if len(r.Attachments) != len(files) || len(r.Before) != len(files) || len(r.After) != len(files) || len(r.Acked) != len(files) {
		t.Fatalf("%d attachments, %d opened before the ack, %d acked, %d after; want %d each", len(r.Attachments), len(r.Before), len(r.Acked), len(r.After), len(files))
	}
	for i, f := range files {
		a := r.Attachments[i]
		if !strings.HasPrefix(a.URI, "platform-pending:"+ws.String()+"/") || a.Name != strings.ReplaceAll(f.Name, " ", "_") || a.MimeType != f.Type || a.Size != int64(f.Size) {
			t.Errorf("attachment %d: %+v, want %s, %s, %d bytes", i, a, f.Name, f.Type, f.Size)
		}
		for when, d := range map[string]struct {
			Status int    `json:"status"`
			Size   int64  `json:"size"`
			Type   string `json:"type"`
			Same   bool   `json:"same"`
			Error  string `json:"error"`
		}{"before the ack": r.Before[i], "after the ack": r.After[i]} {
			if d.Status != http.StatusOK || d.Size != int64(f.Size) || d.Type != f.Type || !d.Same {
				t.Errorf("attachment %d opened %s: %+v, want the %d bytes of %s sent", i, when, d, f.Size, f.Type)
			}
		}
		if !r.Acked[i] {
			t.Errorf("attachment %d: not acked", i)
		}
	}
}

// checkProgress: progress from first to total, never back.
func checkProgress(t *testing.T, r dropInResult, first, total int64) {
	t.Helper()
	p := r.Progress
	if p.Backwards || p.First == nil || p.Last == nil || p.Last.Loaded != total || p.Last.Total != total || p.First.Loaded < first {
		t.Errorf("progress: %d events, first %+v, last %+v, backwards %v; want from %d to %d, never back", p.Count, p.First, p.Last, p.Backwards, first, total)
	}
}

// TestCanvasPartsInFlight measures what parts in flight buy the canvas: a
// 100 MiB upload through the drop-in (bearer mode) over a link of
// measureLinkRate per connection (testkit/throttle in front of moto), with
// one part in flight and with four (the default). It takes about half a
// minute, so it runs only with PENDINGUPLOADS_MEASURE=1, not in make
// test. Four must be at least twice as fast as one.
func TestCanvasPartsInFlight(t *testing.T) {
	if os.Getenv("PENDINGUPLOADS_MEASURE") != "1" {
		t.Skip("a measurement: PENDINGUPLOADS_MEASURE=1 runs it")
	}
	chromium, node := requireBrowser(t)
	rig := startCanvasRig(t, map[string]string{}, measureLinkRate)
	file := []fileSpec{{Name: "dataset.bin", Size: maxUploadBytes, Seed: 40, Type: "application/octet-stream"}}
	var steps []step
	ws := map[int]uuid.UUID{}
	for _, n := range []int{1, 4} {
		ws[n] = uuid.New()
		rig.bucket.set(rig.bucket.throttled, ws[n])
		steps = append(steps, step{Name: strconv.Itoa(n), Page: rig.page.URL + "/dropin.html", Fn: "send", Cookies: []map[string]string{},
			Args: map[string]any{"api": rig.api.URL, "token": rig.srv.AdminToken, "ws": ws[n].String(), "files": file, "partsInFlight": n, "check": false}})
	}
	var res map[string]json.RawMessage
	decodeSteps(t, driveSteps(t, node, chromium, steps), &res)
	took := map[int]time.Duration{}
	for _, n := range []int{1, 4} {
		var r dropInResult
		if err := json.Unmarshal(res[strconv.Itoa(n)], &r); err != nil || !r.OK {
			t.Fatalf("%d in flight: %v %+v", n, err, r.Error)
		}
		took[n] = time.Duration((r.MS - r.Progress.FirstMS) * float64(time.Millisecond))
		t.Logf("%d part(s) in flight over %d MiB/s per connection: 100 MiB in %s (%s of it before the first byte moved: hashing, presign); at most %d PUTs at once",
			n, measureLinkRate>>20, time.Duration(r.MS*float64(time.Millisecond)).Round(time.Millisecond),
			time.Duration(r.Progress.FirstMS*float64(time.Millisecond)).Round(time.Millisecond), rig.bucket.puts(ws[n]).most())
	}
	t.Logf("the transfer alone: %s with 1, %s with 4: %.1fx", took[1].Round(time.Millisecond), took[4].Round(time.Millisecond), float64(took[1])/float64(took[4]))
	if took[4]*2 > took[1] {
		t.Errorf("four parts in flight: %s, one: %s; want four at least twice as fast", took[4], took[1])
	}
}
