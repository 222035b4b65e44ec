package push

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// DefaultTimeout bounds one hint's publication (Hints.Timeout).
const DefaultTimeout = time.Second

// Hints publishes a hint per committed batch of files through Publisher:
// the store's Notifier (pendinguploads.Store.Notifier). It never fails
// the upload: a hint not published within Timeout, or refused, is logged
// and dropped (the client's fallback poll finds the file). Safe for
// concurrent use.
type Hints struct {
	Publisher Publisher
	// Timeout bounds one publication (default DefaultTimeout), whatever
	// the caller's context says: a commit's hint goes out even when the
	// request that made it is being cancelled.
	Timeout time.Duration
	// Logger receives the hints that failed (default slog.Default()).
	Logger *slog.Logger
}

// Notify publishes Hint{ws, fileIDs} on Topic(ws), waiting at most
// Timeout; a failure is logged, never returned.
func (h *Hints) Notify(ctx context.Context, ws uuid.UUID, fileIDs []uuid.UUID) {
	if h == nil || h.Publisher == nil || len(fileIDs) == 0 {
		return
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	start := time.Now()
	if err := h.Publisher.Publish(ctx, Topic(ws), Hint{WorkspaceID: ws, FileIDs: fileIDs}.Payload()); err != nil {
		log := h.Logger
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "upload hint not published; the workspace's fallback poll will find the files",
			"workspace_id", ws, "files", len(fileIDs), "ms", time.Since(start).Milliseconds(), "err", err)
	}
}
