package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// floorSize is the file of BenchmarkFloor's upload and content.
const floorSize = 1 << 20

// BenchmarkFloor compares the service, over loopback HTTP, with the
// floor: floorServer, the least net/http code running the same SQL on
// the same pgx pool (the service's: both sides' statements run on the
// same Postgres backends; with a pool of its own, the floor's uploads
// took a quarter longer inside SendBatch alone, for the same Go work, as
// the uploads alternated between backends). Three servers run
// side by side, each behind an http.Server with the dev server's
// timeouts, reached by one keep-alive http.Client over real TCP:
//
//	floor    floorServer
//	service  the dev server's handler: reqlog.Middleware (request id,
//	         access line) over the API's Mux, logging as the dev server
//	         does (JSON through reqlog's handler; here into io.Discard)
//	mux      the API's Mux alone, what a function serves behind its
//	         adapter
//
// Each iteration makes one call of each, in an order that rotates, so
// noise on the shared cores falls on all three alike; each call is timed
// on its own (the benchmark's ns/op is the three together). Reported, per
// side: ns/req (mean) and, measured after the timed loop on a few calls
// with runtime.ReadMemStats around the server's handler (the client's
// share is left out), allocs/req and B/req, and cpu-ns/req: this
// process's CPU time per call (client and server, not Postgres's); and
// ratio (mean service / mean floor, the target: 1.25), p50-ratio (the
// median of each iteration's service / floor), mux-ratio (means) and
// cpu-ratio.
//
//	list               the first page (50 of 200), workspace token
//	content/size=1MiB  an inline 1 MiB file (its fetched_at stamped)
//	upload/size=1MiB   a one-file multipart upload, workspace token
//
// Every handler goroutine is labelled side=<side> for a CPU profile:
// go test -cpuprofile cpu.out …, then go tool pprof -tagfocus
// side=service -top -cum cpu.out.
func BenchmarkFloor(b *testing.B) {
	// The default configuration, quota included: the floor carries the
	// same statements (a run stages a few hundred files, far from it).
	srv := apptest.NewServer(b, apptest.Options{})
	// The dev server's logger: the API logs its lines through it.
	devLog := slog.New(reqlog.NewHandler(slog.NewJSONHandler(io.Discard, nil)))
	srv.App.API.Logger = devLog
	mux := srv.App.API.Mux()
	fl := &floorServer{pool: srv.App.Pool, maxFiles: srv.Store.MaxPendingFiles,
		maxBytes: srv.Store.MaxPendingBytes, ttl: srv.App.Config.UploadTTL}
	sides := []*side{
		{name: "floor", h: fl.handler()},
		{name: "service", h: reqlog.Middleware(mux, devLog)},
		{name: "mux", h: mux},
	}
	for _, s := range sides {
		s.base = loopback(b, s)
	}
	c := &loopClient{Client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 2}}}
	b.Cleanup(c.CloseIdleConnections)

	// list: a workspace with 200 pending one-byte files.
	listWS := uuid.New()
	listTok := srv.WorkspaceToken(b, listWS)
	mustExec(b, srv, `
		INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		SELECT $1, '\x78'::bytea, 1, sha256('\x78'::bytea), 'f' || g || '.txt', 'text/plain',
		       now() - interval '1 hour' + g * interval '1 millisecond', now() + interval '24 hours'
		FROM generate_series(1, 200) g`, listWS)
	// content: a workspace with one 1 MiB file, inline.
	contentWS := uuid.New()
	contentTok := srv.WorkspaceToken(b, contentWS)
	body, ctype := multipartBody(file{"bench.bin", payload(floorSize)})
	res := serve(b, srv.App.API.Mux(), "POST", "/workspaces/"+contentWS.String()+"/chat/uploads", srv.AdminToken, ctype, body, 200)
	contentPath := "/workspaces/" + contentWS.String() + "/pending-uploads/" + stagedID(b, res) + "/content"
	// upload: a workspace of its own, emptied now and then (not timed).
	uploadWS := uuid.New()
	uploadTok := srv.WorkspaceToken(b, uploadWS)
	uploadPath := "/workspaces/" + uploadWS.String() + "/chat/uploads"
	empty := func() {
		mustExec(b, srv, `DELETE FROM pending_uploads WHERE workspace_id = $1`, uploadWS)
		mustExec(b, srv, `DELETE FROM activity_logs WHERE workspace_id = $1`, uploadWS)
	}

	for _, tc := range []struct {
		name  string
		call  func(tb testing.TB, base string) *answer
		empty func()
	}{
		{"list", func(tb testing.TB, base string) *answer {
			return c.do(tb, "GET", base+"/workspaces/"+listWS.String()+"/pending-uploads", listTok, "", nil, true)
		}, nil},
		{"content/size=1MiB", func(tb testing.TB, base string) *answer {
			a := c.do(tb, "GET", base+contentPath, contentTok, "", nil, false)
			if a.n != floorSize {
				tb.Fatalf("content: got %d bytes, want %d", a.n, floorSize)
			}
			return a
		}, nil},
		{"upload/size=1MiB", func(tb testing.TB, base string) *answer {
			return c.do(tb, "POST", base+uploadPath, uploadTok, ctype, body, true)
		}, empty},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.empty != nil {
				tc.empty()
			}
			// Warm every side (statements prepared, connections open,
			// the token stamped), and hold the floor to the service's
			// answer.
			for range 3 {
				for _, s := range sides {
					s.answer = tc.call(b, s.base)
				}
			}
			for _, s := range sides[1:] {
				sameAnswer(b, tc.name, sides[0].answer, s.answer)
			}
			for _, s := range sides {
				s.reset(tc.name)
			}

			i := 0
			for b.Loop() {
				for k := range sides {
					s := sides[(i+k)%len(sides)]
					t0, c0 := time.Now(), processCPU()
					tc.call(b, s.base)
					s.d = append(s.d, time.Since(t0))
					s.cpu += processCPU() - c0
				}
				if i++; tc.empty != nil && i%64 == 0 {
					b.StopTimer()
					tc.empty()
					b.StartTimer()
				}
			}

			b.StopTimer()
			if tc.empty != nil {
				tc.empty()
			}
			const allocCalls = 20
			for _, s := range sides {
				s.counting.Store(true)
				for range allocCalls {
					tc.call(b, s.base)
				}
				s.counting.Store(false)
			}
			floor, service, mux := sides[0], sides[1], sides[2]
			for _, s := range sides {
				b.ReportMetric(s.mean(), s.name+"-ns/req")
				b.ReportMetric(float64(s.cpu.Nanoseconds())/float64(len(s.d)), s.name+"-cpu-ns/req")
				b.ReportMetric(float64(s.allocs.Load())/allocCalls, s.name+"-allocs/req")
				b.ReportMetric(float64(s.bytes.Load())/allocCalls, s.name+"-B/req")
			}
			b.ReportMetric(service.mean()/floor.mean(), "ratio")
			b.ReportMetric(pairedMedian(service.d, floor.d), "p50-ratio")
			b.ReportMetric(mux.mean()/floor.mean(), "mux-ratio")
			b.ReportMetric(float64(service.cpu)/float64(floor.cpu), "cpu-ratio")
		})
	}
}

// side is one of BenchmarkFloor's servers: its handler, wrapped to label
// its goroutine for the profiler and, while counting, to count what the
// handler allocates; and the durations of its timed calls.
type side struct {
	name   string
	h      http.Handler
	base   string
	labels pprof.LabelSet
	d      []time.Duration
	cpu    time.Duration // the process's CPU time during the timed calls
	answer *answer

	counting      atomic.Bool
	allocs, bytes atomic.Uint64
}

func (s *side) reset(call string) {
	s.labels = pprof.Labels("side", s.name, "call", call)
	s.d, s.cpu = s.d[:0], 0
	s.allocs.Store(0)
	s.bytes.Store(0)
}

func (s *side) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pprof.Do(context.Background(), s.labels, func(context.Context) {
		if !s.counting.Load() {
			s.h.ServeHTTP(w, r)
			return
		}
		// One request at a time: the process's allocations while the
		// handler runs are the handler's (and the client's few, reading
		// or writing beside it).
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s.h.ServeHTTP(w, r)
		runtime.ReadMemStats(&m1)
		s.allocs.Add(m1.Mallocs - m0.Mallocs)
		s.bytes.Add(m1.TotalAlloc - m0.TotalAlloc)
	})
}

func (s *side) mean() float64 {
	var t time.Duration
	for _, d := range s.d {
		t += d
	}
	return float64(t.Nanoseconds()) / float64(len(s.d))
}

// pairedMedian is the median over the iterations of num[i] / den[i]: the
// two calls of one iteration ran back to back, so a burst of load that
// lasts a few calls moves a few of these ratios, not the median.
func pairedMedian(num, den []time.Duration) float64 {
	rs := make([]float64, len(num))
	for i := range num {
		rs[i] = float64(num[i]) / float64(den[i])
	}
	slices.Sort(rs)
	return rs[(len(rs)-1)/2]
}

// loopback serves h on a loopback port, with the dev server's timeouts
// (cmd/devserver: each request sets its connection's deadlines), and
// returns its base URL.
func loopback(tb testing.TB, h http.Handler) string {
	hs := httptest.NewUnstartedServer(h)
	hs.Config.ReadHeaderTimeout = 10 * time.Second
	hs.Config.ReadTimeout = 5 * time.Minute
	hs.Config.WriteTimeout = 5 * time.Minute
	hs.Config.IdleTimeout = 2 * time.Minute
	hs.Config.MaxHeaderBytes = 64 << 10
	hs.Start()
	tb.Cleanup(hs.Close)
	return hs.URL
}

// loopClient is the benchmark's HTTP client: keep-alive, one connection
// per server, the body of each answer read to its end.
type loopClient struct{ *http.Client }

// answer is what a call got: the status, headers, the body (when kept)
// and its length.
type answer struct {
	status int
	header http.Header
	body   []byte
	n      int64
}

// do makes one call and fails tb unless it is a 200; keep keeps the body.
func (c *loopClient) do(tb testing.TB, method, url, token, ctype string, body []byte, keep bool) *answer {
	rd := io.Reader(http.NoBody)
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	a := &answer{status: resp.StatusCode, header: resp.Header}
	if keep || resp.StatusCode != http.StatusOK {
		a.body, err = io.ReadAll(resp.Body)
		a.n = int64(len(a.body))
	} else {
		a.n, err = io.Copy(io.Discard, resp.Body)
	}
	if err != nil {
		tb.Fatalf("%s %s: body: %v", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s %s: got %d %s, want 200", method, url, resp.StatusCode, a.body)
	}
	return a
}

// sameAnswer fails tb unless got answers as want does: the same headers
// (but the date and the request id), and the same body; an upload's
// answer, whose IDs are fresh, the same but for them.
func sameAnswer(tb testing.TB, call string, want, got *answer) {
	tb.Helper()
	headers := func(h http.Header) map[string][]string {
		m := maps.Clone(h)
		delete(m, "Date")
		delete(m, reqlog.HeaderRequestID)
		return m
	}
	if !reflect.DeepEqual(headers(want.header), headers(got.header)) {
		tb.Fatalf("%s: headers differ from the floor's:\n got %v\nwant %v", call, headers(got.header), headers(want.header))
	}
	wb, gb := want.body, got.body
	if call == "upload/size=1MiB" {
		wb, gb = withoutIDs(tb, wb), withoutIDs(tb, gb)
	}
	if !bytes.Equal(wb, gb) || want.n != got.n {
		tb.Fatalf("%s: body differs from the floor's:\n got %.300s\nwant %.300s", call, gb, wb)
	}
}

// withoutIDs is an upload's answer with its file IDs and URIs blanked.
func withoutIDs(tb testing.TB, body []byte) []byte {
	var v struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Files) != 1 {
		tb.Fatalf("upload answer %q: %v", body, err)
	}
	v.Files[0]["file_id"], v.Files[0]["uri"] = "", ""
	out, _ := json.Marshal(v)
	return out
}
