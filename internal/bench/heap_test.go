package bench

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// inlineMax is the largest file of the default configuration that the
// upload and content handlers carry inline in one call: a multipart body
// just under MAX_REQUEST_BYTES (4 MiB), so every byte of it is also in
// Postgres and comes back in one 200.
const inlineMax = 4<<20 - 1024

// BenchmarkHeap measures, for the upload and content handlers' largest
// inline case under the default caps, the bytes allocated per call and
// the peak of the heap during one call above the heap before it (after a
// GC), sampled from runtime/metrics by a goroutine that spins beside the
// call. Both are reported per byte of the file: the target is under 3.
func BenchmarkHeap(b *testing.B) {
	srv := apptest.NewServer(b, apptest.Options{}) // default caps
	h := srv.App.API.Mux()
	ws := uuid.New()
	tok := srv.WorkspaceToken(b, ws)
	body, ctype := multipartBody(file{"largest.bin", payload(inlineMax)})
	uploadURL := "/workspaces/" + ws.String() + "/chat/uploads"
	res := serve(b, h, "POST", uploadURL, srv.AdminToken, ctype, body, 200)
	contentURL := "/workspaces/" + ws.String() + "/pending-uploads/" + stagedID(b, res) + "/content"

	for _, tc := range []struct {
		name string
		call func()
	}{
		{"upload", func() { serve(b, h, "POST", uploadURL, srv.AdminToken, ctype, body, 200) }},
		{"content", func() { serve(b, h, "GET", contentURL, tok, "", nil, 200) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var peak, alloc uint64
			for b.Loop() {
				p, a := measure(tc.call)
				peak, alloc = max(peak, p), alloc+a
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
			b.ReportMetric(float64(peak)/inlineMax, "peak/body")
			b.ReportMetric(float64(alloc)/float64(b.N)/inlineMax, "alloc/body")
			b.ReportMetric(inlineMax, "body-B")
		})
	}
}

// measure runs call once and returns the heap's peak above its level
// before the call, and the bytes the call allocated.
func measure(call func()) (peak, alloc uint64) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	base, allocs0 := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var stop atomic.Bool
	var high uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for !stop.Load() {
			metrics.Read(s)
			high = max(high, s[0].Value.Uint64())
			runtime.Gosched()
		}
	})
	call()
	stop.Store(true)
	wg.Wait()
	metrics.Read(samples)
	high = max(high, samples[0].Value.Uint64())
	if high > base {
		peak = high - base
	}
	return peak, samples[1].Value.Uint64() - allocs0
}
