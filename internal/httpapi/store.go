package httpapi

import (
	"context"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Store is what the handlers ask of the storage: exactly the methods of
// *pendinguploads.Store they call, with its contracts (see each method's
// doc there) and its sentinel errors, which errors.go turns into answers.
// The service owns the workflow (checks, SQL, objects); the handlers
// parse, call one method and translate. Production hands New the
// *pendinguploads.Store (internal/app); the handler tests of HTTP's own
// behaviour use an in-memory fake (fake_test.go), and the suites against
// Postgres prove the contract itself.
//
// What a store can do is asked explicitly (HasBucket: presign, commit and
// redirects), never by a type assertion.
type Store interface {
	// Stage stores a multipart form's files (POST …/chat/uploads).
	Stage(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, files []pendinguploads.File) ([]pendinguploads.Record, error)
	// Presign records and signs presigned uploads (POST …/presign).
	Presign(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, files []pendinguploads.Declared) ([]pendinguploads.PresignedPut, error)
	// Commit stages presigned uploads (POST …/chat/uploads, JSON).
	Commit(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, uploadIDs []uuid.UUID) (recs []pendinguploads.Record, replayed bool, err error)
	// Resume signs a multipart upload's missing parts (POST …/presign/{uploadId}).
	Resume(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) (pendinguploads.PresignedPut, error)
	// Abort drops a presigned upload (DELETE …/presign/{uploadId}).
	Abort(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) error
	// List is a page of a workspace's files (GET …/pending-uploads).
	List(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, limit int, after *pendinguploads.Cursor) (recs []pendinguploads.Record, next *pendinguploads.Cursor, err error)
	// Fetch looks a file up for serving (GET …/content).
	Fetch(ctx context.Context, id *auth.Identity, workspaceID, fileID uuid.UUID, want pendinguploads.Want) (pendinguploads.Fetched, error)
	// FetchLinked looks a file up for the holder of a download link the
	// route verified (GET …/download): no caller to check.
	FetchLinked(ctx context.Context, link downloadlink.Verified, want pendinguploads.Want) (pendinguploads.Fetched, error)
	// Open reads the bytes of a file Fetch or FetchLinked returned (and
	// only such a file: pendinguploads.ErrNotFetched).
	Open(ctx context.Context, f pendinguploads.Fetched, off, n int64) (pendinguploads.Body, error)
	// SignGet signs a redirect to a bucket-held file Fetch returned.
	SignGet(ctx context.Context, f pendinguploads.Fetched, disposition, contentType string) (url string, ok bool, err error)
	// Ack marks a file acked (POST …/ack).
	Ack(ctx context.Context, id *auth.Identity, workspaceID, fileID uuid.UUID) (pendinguploads.AckResult, error)
	// ScanStates is each file's malware scan state (GET …/chat/uploads/scan).
	ScanStates(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]pendinguploads.FileScan, error)
	// Verify looks a bearer up before a refusal no store call checked
	// (verifyBeforeRefusal).
	Verify(ctx context.Context, id *auth.Identity, ws *uuid.UUID) error
	// HasBucket reports whether presigned uploads and redirects are
	// offered.
	HasBucket() bool
}

var _ Store = (*pendinguploads.Store)(nil)
