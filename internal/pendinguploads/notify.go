package pendinguploads

import (
	"context"

	"github.com/google/uuid"
)

// Notifier hears of files once the transaction that stored them has
// committed (Stage, and a Commit that stored new files; never a replay):
// push.Hints publishes a hint to the workspace's subscribers. Notify must
// bound its own time and report nothing back: an upload never fails, and
// never waits long, for a hint.
type Notifier interface {
	Notify(ctx context.Context, workspaceID uuid.UUID, fileIDs []uuid.UUID)
}
