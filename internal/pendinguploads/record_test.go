package pendinguploads_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestURI: the platform-pending: URI spells both IDs as uuid.String does.
func TestURI(t *testing.T) {
	for range 100 {
		r := pendinguploads.Record{WorkspaceID: uuid.New(), FileID: uuid.New()}
		if got, want := r.URI(), "platform-pending:"+r.WorkspaceID.String()+"/"+r.FileID.String(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = pendinguploads.Record{}.URI() }); allocs > 1 {
		t.Errorf("allocations per URI: %v, want 1", allocs)
	}
}
