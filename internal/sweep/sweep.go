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
}

// Run sweeps once and reports: one log line with the counts, and the
// pending_uploads_swept metric by outcome (acked, expired, and error on
// failure). On failure it returns the counts of what was deleted before
// the error, and the error, so the caller can fail the invocation.
func Run(ctx context.Context, s Sweeper, ackRetention time.Duration, log *slog.Logger, m *metrics.Emitter) (pendinguploads.SweepResult, error) {
	start := time.Now()
	res, err := s.Sweep(ctx, ackRetention)
	m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeAcked}, float64(res.Acked), nil)
	m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeExpired}, float64(res.Expired), nil)
	attrs := []any{"acked", res.Acked, "expired", res.Expired, "ack_retention", ackRetention.String(),
		"duration_ms", time.Since(start).Milliseconds()}
	if err != nil {
		m.Count(metrics.Swept, map[string]string{metrics.Outcome: metrics.OutcomeError}, 1, nil)
		log.Error("sweep failed", append(attrs, "err", err)...)
		return res, err
	}
	log.Info("swept", attrs...)
	return res, nil
}
