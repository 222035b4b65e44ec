package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// MaxFilenameBytes is the longest filename the schema accepts.
const MaxFilenameBytes = 100

var (
	// ErrNotFound is returned by Fetch, Open and Ack when the row is
	// absent or expired (or swept meanwhile), or another workspace's,
	// which no statement reads. The cases mean the same to a workspace:
	// the file is not there, and nothing tells another workspace's file
	// from none.
	ErrNotFound = errors.New("pendinguploads: upload not found or expired")
	// ErrTooLarge is returned by Stage and Presign for a file over the
	// Store's FileCap.
	ErrTooLarge = errors.New("pendinguploads: content exceeds per-file cap")
	// ErrEmptyContent is returned by Stage and Presign for a file of 0 bytes.
	ErrEmptyContent = errors.New("pendinguploads: empty content")
	// ErrEmptyFilename is returned by Stage and Presign for a file with
	// no name.
	ErrEmptyFilename = errors.New("pendinguploads: empty filename")
	// ErrFilenameTooLong is returned by Stage and Presign for a name over
	// MaxFilenameBytes bytes.
	ErrFilenameTooLong = errors.New("pendinguploads: filename exceeds 100 bytes")
	// ErrTooManyItems is returned by Stage, Presign and Commit for more
	// than limits.MaxFiles files.
	ErrTooManyItems = errors.New("pendinguploads: too many items in one batch")
	// ErrBadCursor is returned by DecodeCursor (and List) for a cursor
	// this package did not produce.
	ErrBadCursor = errors.New("pendinguploads: invalid cursor")
	// ErrBlobNotFound is returned (wrapped) by a Bucket for a key it does
	// not hold.
	ErrBlobNotFound = errors.New("pendinguploads: blob not found")
	// ErrNoBucket is returned by Presign and Commit of a Store without a
	// bucket (presigned uploads are off), and when a file needs the
	// bucket the Store does not have.
	ErrNoBucket = errors.New("pendinguploads: no bucket configured")
	// ErrUnknownWorkspace is returned (wrapped) by Stage and Commit when
	// the database does not know their workspace: on the platform's
	// database activity_logs references its workspaces (a foreign key,
	// SQLSTATE 23503); on the service's own, with
	// Settings.RefuseUnknownWorkspaces, no token was ever made for it.
	// Nothing is stored then.
	ErrUnknownWorkspace = errors.New("pendinguploads: workspace not found")
	// ErrWorkspaceBusy is returned (wrapped) by Stage and Commit when the
	// workspace's turn did not come within their bounded wait
	// (Settings.LockWait, Settings.LockTries): other calls of the same
	// workspace held it. Nothing is stored; a retry shortly may succeed.
	ErrWorkspaceBusy = errors.New("pendinguploads: workspace busy")
	// ErrNotHeld is returned (wrapped) by DecideHeld for a file that is
	// not held for an operator and not already in the state asked for:
	// waiting for its scan, delivered (never taken back), or blocked
	// (never delivered). Nothing changed.
	ErrNotHeld = errors.New("pendinguploads: file not held for an operator")
	// ErrUnavailable wraps every failure that means a dependency is down
	// or too slow (connection refused or lost, connect or statement
	// timeout, server shutting down). HTTP answers it with 503; a retry
	// may succeed. Test with errors.Is.
	ErrUnavailable = errors.New("pendinguploads: storage unavailable")
)

// ItemError names the item of a batch that failed validation.
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("item %d: %v", e.Index, e.Err) }
func (e *ItemError) Unwrap() error { return e.Err }

// wrap adds the operation's name and, when err means a dependency is down
// or too slow, ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if IsUnavailable(err) && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.TableName == "activity_logs" {
		return fmt.Errorf("%s: %w: %w", op, ErrUnknownWorkspace, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IsUnavailable reports whether err means the database (or another
// dependency reached over the network) is down or too slow, as opposed to
// a bug or a refused statement: Postgres's codes are read here; the
// bucket's are read where the bucket is, and arrive wrapping
// ErrUnavailable (s3blobs). A client that went away (context.Canceled) is
// not unavailability.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57014", // query_canceled: statement_timeout
			pgErr.Code == "57P01", // admin_shutdown
			pgErr.Code == "57P02", // crash_shutdown
			pgErr.Code == "57P03", // cannot_connect_now: starting up
			pgErr.Code == "53300", // too_many_connections
			pgErr.Code == "55P03", // lock_not_available: lock_timeout
			pgErr.Code == "40001", // serialization_failure: a retry may pass
			pgErr.Code == "40P01": // deadlock_detected: likewise
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
