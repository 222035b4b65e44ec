// Package sweep runs one sweep of the pending uploads, with its log line
// and metrics: the scheduled function, the dev server's timer and
// `pendingctl sweep` all call Run.
package sweep

import (
	"context"
	"log/slog"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Sweeper is what Run needs of the store.
type Sweeper interface {
	Sweep(ctx context.Context, ackRetention time.Duration) (pendinguploads.SweepResult, error)
	Backlog(ctx context.Context) (pendinguploads.Backlog, error)
}

// Run sweeps once and reports: one log line with the counts, whether the
// sweep stopped before it finished (unfinished: the next run resumes where
// it stopped) and the backlog left, the pending_uploads_swept metric by
// outcome (acked, expired, and error on failure),
// pending_uploads_sweep_unfinished (1 or 0), and the backlog metrics
// (pending_uploads_backlog_files, _bytes, _oldest_age_seconds), and how
// near the quota the fullest workspace is
// (pending_uploads_workspace_max_pending_bytes, _files). The
// backlog is measured after the sweep, even a failed one; failing to
// measure it is logged and leaves its metrics out (the backlog alarm
// treats missing data as breaching), but does not fail the run. On a
// sweep failure Run returns the counts of what was deleted before the
// error, and the error, so the caller can fail the invocation.
func Run(ctx context.Context, s Sweeper, ackRetention time.Duration, log *slog.Logger, m *metrics.Emitter) (pendinguploads.SweepResult, error) {
	start := time.Now()
	res, err := s.Sweep(ctx, ackRetention)
	m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeAcked}, float64(res.Acked), nil)
	m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeExpired}, float64(res.Expired), nil)
	unfinished := 0.0
	if res.Unfinished {
		unfinished = 1
	}
	m.Count(metrics.SweepUnfinished, nil, unfinished, nil)
	attrs := []any{"acked", res.Acked, "expired", res.Expired, "orphans", res.Orphans, "activity", res.Activity, "unfinished", res.Unfinished,
		"ack_retention", ackRetention.String()}
	if b, berr := s.Backlog(ctx); berr != nil {
		log.Warn("backlog not measured", "err", berr)
	} else {
		m.Count(metrics.BacklogFiles, nil, float64(b.Files), nil)
		m.Add(metrics.BacklogBytes, metrics.UnitBytes, nil, float64(b.Bytes), nil)
		m.Add(metrics.BacklogOldestAge, metrics.UnitSeconds, nil, b.OldestAge.Seconds(), nil)
		m.Add(metrics.WorkspaceMaxPendingBytes, metrics.UnitBytes, nil, float64(b.WorkspaceMaxBytes), nil)
		m.Count(metrics.WorkspaceMaxPendingFiles, nil, float64(b.WorkspaceMaxFiles), nil)
		attrs = append(attrs, "backlog_files", b.Files, "backlog_bytes", b.Bytes,
			"backlog_oldest_age_s", int64(b.OldestAge.Seconds()), "backlog_truncated", b.Truncated,
			"fullest_workspace", b.FullestWorkspace, "fullest_workspace_bytes", b.WorkspaceMaxBytes,
			"workspace_max_files", b.WorkspaceMaxFiles)
	}
	attrs = append(attrs, "duration_ms", time.Since(start).Milliseconds())
	if err != nil {
		m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeError}, 1, nil)
		log.Error("sweep failed", append(attrs, "err", err)...)
		return res, err
	}
	log.Info("swept", attrs...)
	return res, nil
}
