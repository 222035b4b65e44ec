package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkSweep deletes a backlog of 100k acked rows (acked two hours
// ago, past the default one-hour retention) with the store's Sweep, in
// its default batches, while a concurrent client uploads one 4 KiB file
// after another through the upload handler. It reports the sweep's total
// time, rows per second, and the longest any one of those uploads took
// while the sweep ran, next to the longest one took in the second before
// it (the same uploads with no sweep). Run it with -benchtime 1x: each
// iteration seeds the backlog again, untimed.
func BenchmarkSweep(b *testing.B) {
	const backlog = 100_000
	srv := benchServer(b)
	h := srv.App.API.Mux()
	body, ctype := multipartBody(file{"concurrent.bin", payload(4 << 10)})
	url := "/workspaces/" + uuid.NewString() + "/chat/uploads"

	var total time.Duration
	var deleted int
	var maxDuring, maxBefore, p50During time.Duration
	var uploadsDuring int
	for range b.N {
		b.StopTimer()
		mustExec(b, srv, `
			INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype,
			                             created_at, expires_at, acked_at)
			SELECT md5((g % 1000)::text)::uuid, '\x78'::bytea, 1, sha256('\x78'::bytea), 'o' || g || '.txt', '',
			       now() - interval '3 hours', now() + interval '21 hours', now() - interval '2 hours'
			FROM generate_series(1, $1::int) g`, backlog)
		mustExec(b, srv, `VACUUM ANALYZE pending_uploads`)

		// The concurrent uploader: one upload after another, each timed
		// and tagged with whether the sweep was running.
		var sweeping, stop atomic.Bool
		var mu sync.Mutex
		var before, during []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() {
			for !stop.Load() {
				on := sweeping.Load()
				t0 := time.Now()
				serve(b, h, "POST", url, srv.AdminToken, ctype, body, 200)
				d := time.Since(t0)
				mu.Lock()
				if on && sweeping.Load() {
					during = append(during, d)
				} else if !on && !sweeping.Load() {
					before = append(before, d)
				}
				mu.Unlock()
			}
		})
		time.Sleep(time.Second)

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		sweeping.Store(true)
		b.StartTimer()
		t0 := time.Now()
		res, err := srv.Store.Sweep(ctx, time.Hour)
		d := time.Since(t0)
		b.StopTimer()
		sweeping.Store(false)
		cancel()
		stop.Store(true)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if res.Acked != backlog {
			b.Fatalf("swept %d acked rows, want %d", res.Acked, backlog)
		}
		total += d
		deleted += res.Acked
		maxDuring = max(maxDuring, percentile(during, 100))
		maxBefore = max(maxBefore, percentile(before, 100))
		p50During = max(p50During, percentile(during, 50))
		uploadsDuring += len(during)
		mustExec(b, srv, `TRUNCATE pending_uploads, activity_logs`)
		b.StartTimer()
	}
	b.ReportMetric(ms(total)/float64(b.N), "sweep-ms")
	b.ReportMetric(float64(deleted)/total.Seconds(), "rows/s")
	b.ReportMetric(ms(maxDuring), "max-upload-wait-ms")
	b.ReportMetric(ms(p50During), "p50-upload-during-ms")
	b.ReportMetric(ms(maxBefore), "max-upload-idle-ms")
	b.ReportMetric(float64(uploadsDuring)/float64(b.N), "uploads-during")
}
