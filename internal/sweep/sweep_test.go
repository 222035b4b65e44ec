package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sweep"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestRunReportsBacklog: one sweep over real rows emits the swept counts
// and the backlog left after it (files, bytes, the oldest's age), and logs
// the same on its line.
func TestRunReportsBacklog(t *testing.T) {
	pool := pgtest.MustOpen(t)
	s := pendinguploads.New(pool, nil, apptest.StoreSettings())
	ctx := context.Background()
	ws := uuid.New()
	var wantBytes int64
	for i, set := range []string{
		`created_at = now() - interval '2 hours'`,  // waiting, the oldest
		`fetched_at = now()`,                       // waiting
		`expires_at = now() - interval '1 second'`, // swept as expired
		`acked_at = now() - interval '2 hours'`,    // swept as acked
	} {
		recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: bytes.Repeat([]byte("x"), 10+i), Filename: "f.txt", Mimetype: "text/plain"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := recs[0]
		if _, err := pool.Exec(ctx, `UPDATE pending_uploads SET `+set+` WHERE file_id = $1`, rec.FileID); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			wantBytes += rec.SizeBytes
		}
	}

	var out, logs bytes.Buffer
	res, err := sweep.Run(ctx, s, time.Hour, slog.New(slog.NewJSONHandler(&logs, nil)), metrics.New(&out, metrics.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	if res != (pendinguploads.SweepResult{Acked: 1, Expired: 1}) {
		t.Errorf("got %+v, want 1 acked, 1 expired", res)
	}

	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, name := range []string{metrics.BacklogFiles, metrics.BacklogBytes, metrics.BacklogOldestAge} {
			if v, ok := doc[name].(float64); ok {
				got[name] = v
			}
		}
	}
	if got[metrics.BacklogFiles] != 2 || got[metrics.BacklogBytes] != float64(wantBytes) {
		t.Errorf("backlog metrics: got %v, want 2 files, %d bytes", got, wantBytes)
	}
	if age := got[metrics.BacklogOldestAge]; age < 7200 || age > 7260 {
		t.Errorf("oldest age: got %v s, want about 7200", age)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line["msg"] != "swept" || line["backlog_files"] != float64(2) || line["backlog_bytes"] != float64(wantBytes) {
		t.Errorf("log line: got %v", line)
	}
}

// TestRunSaysUnfinished: a sweep cut short by its batches says so on its
// log line (unfinished) and in pending_uploads_sweep_unfinished, and the
// next run, which finishes, says 0.
func TestRunSaysUnfinished(t *testing.T) {
	pool := pgtest.MustOpen(t)
	s := pendinguploads.New(pool, nil, apptest.StoreSettings())
	s.SweepBatch, s.MaxSweepBatches = 2, 1
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, expires_at)
		SELECT gen_random_uuid(), 'x', 1, 'f', now() - interval '1 minute' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		unfinished bool
		metric     float64
	}{{true, 1}, {false, 0}} {
		var out, logs bytes.Buffer
		if _, err := sweep.Run(ctx, s, time.Hour, slog.New(slog.NewJSONHandler(&logs, nil)), metrics.New(&out, metrics.Namespace)); err != nil {
			t.Fatal(err)
		}
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
			t.Fatalf("log %q: %v", logs.String(), err)
		}
		if line["unfinished"] != want.unfinished {
			t.Errorf("log line's unfinished: got %v, want %v", line["unfinished"], want.unfinished)
		}
		got := -1.0
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var doc map[string]any
			if err := json.Unmarshal([]byte(l), &doc); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			if v, ok := doc[metrics.SweepUnfinished].(float64); ok {
				got = v
			}
		}
		if got != want.metric {
			t.Errorf("%s: got %v, want %v", metrics.SweepUnfinished, got, want.metric)
		}
	}
}
