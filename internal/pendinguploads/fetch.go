package pendinguploads

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
)

// ChunkBytes is how much of a file Fetch returns with the row, and how much
// Open reads from Postgres at a time: what serving a file holds in memory,
// whatever its size.
const ChunkBytes = 1 << 20

// Want is what an answer will send of a file: the bytes from From on
// (0: the whole file; a range no file can satisfy: math.MaxInt64), or,
// with Redirect, a redirect to the bucket when the file is there.
// IfDigest, when set, makes From conditional (a Range with If-Range): a
// file whose SHA-256 is another, or none, is sent whole.
type Want struct {
	From     int64
	IfDigest []byte
	Redirect bool
}

// sends reports whether an answer wanting w sends anything of r: bytes,
// or a redirect. It is the stamp's condition in Fetch's statement.
func (w Want) sends(r Record) bool {
	whole := w.IfDigest != nil && !bytes.Equal(r.SHA256, w.IfDigest)
	return whole || r.SizeBytes > w.From || (w.Redirect && r.s3Key != "")
}

// Fetched is a file Fetch (or FetchLinked) found for a caller it
// checked: the file's Record, the file's id as the statement read it,
// and the check (an access on the file's workspace, for a link on that
// one file alone) without which Open and SignGet read nothing. Open and
// SignGet read the file by the id and the check held inside, never by
// the Record's fields, which are the caller's copy. A Fetched made
// otherwise, its zero value, or one whose Record was changed to another
// file or workspace holds no check: Open and SignGet refuse it
// (ErrNotFetched) before any I/O.
type Fetched struct {
	Record
	file uuid.UUID
	by   *access
}

// ErrNotFetched is returned by Open and SignGet for a file that Fetch
// did not find for a checked caller (a Fetched assembled by hand, or
// one whose Record was changed to another file or workspace): a bug,
// never a caller's answer.
var ErrNotFetched = errors.New("pendinguploads: a file not found by Fetch")

// checked returns the access f's bytes are read with, or ErrNotFetched.
func (f Fetched) checked(op string) (*access, error) {
	if f.by == nil || f.by.callerMayAct == "" || f.file == uuid.Nil || !f.by.mayRead(f.file) ||
		f.by.ws != f.WorkspaceID || f.file != f.FileID {
		return nil, fmt.Errorf("%s %s: %w", op, f.FileID, ErrNotFetched)
	}
	return f.by, nil
}

// Fetch looks up file fileID of workspaceID for serving, acting for id (with its
// check), and stamps its fetched_at (a later fetch moves it again) when
// the answer will send what want asks of it (see Want; a 416 leaves
// fetched_at alone, and the record comes back for its size): one round
// trip. A servable row is unacked and unexpired, or acked and not
// yet swept: the canvas re-opens attachments after the workspace acked
// them. An inline file of at most ChunkBytes comes with the row; Open
// reads any file.
//
// It returns ErrNotFound for an absent or expired row, for a row that
// vanished (swept) while the statement ran, and for another workspace's
// row alike, which no statement reads: a caller learns nothing of other
// workspaces' files.
func (s *Store) Fetch(ctx context.Context, id *auth.Identity, workspaceID, fileID uuid.UUID, want Want) (Fetched, error) {
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return Fetched{}, err
	}
	return s.fetch(ctx, a, fileID, want)
}

// fetch is Fetch's statement, sent with a, the caller's check on its
// workspace (Fetch's, or FetchLinked's on one file: another file is
// ErrNotFetched before any I/O).
func (s *Store) fetch(ctx context.Context, a *access, fileID uuid.UUID, want Want) (Fetched, error) {
	if a == nil || !a.mayRead(fileID) {
		return Fetched{}, fmt.Errorf("fetch %s: %w", fileID, ErrNotFetched)
	}
	var r Record
	var key *string
	var stamped, found bool
	// The outer SELECT reads the row as the statement's snapshot has it; the
	// UPDATE in the CTE stamps it, and brings the bytes; each reads only
	// this workspace's row. If the row changed under the statement (a sweep
	// deleted it), the UPDATE re-checks the newest version and skips it:
	// stamped is then false, and the answer is ErrNotFound rather than a
	// row without its bytes.
	var b pgx.Batch
	b.Queue(`
		WITH u AS (
		    UPDATE pending_uploads SET fetched_at = now()
		    WHERE file_id = @file_id AND workspace_id = @workspace AND (acked_at IS NOT NULL OR expires_at > now())
		      AND (size_bytes > @from::bigint OR sha256 IS DISTINCT FROM coalesce(@if_digest::bytea, sha256)
		           OR (@redirect::boolean AND s3_key IS NOT NULL))
		      AND `+a.callerMayAct+`
		    RETURNING file_id, fetched_at,
		              CASE WHEN s3_key IS NULL AND size_bytes <= @chunk::bigint THEN content END AS content
		)
		SELECT p.file_id, p.workspace_id, p.filename, p.mimetype, p.size_bytes, p.sha256,
		       p.created_at, coalesce(u.fetched_at, p.fetched_at), p.acked_at, p.expires_at, p.s3_key,
		       u.content, u.file_id IS NOT NULL
		FROM pending_uploads p LEFT JOIN u ON u.file_id = p.file_id
		WHERE p.file_id = @file_id AND (p.acked_at IS NOT NULL OR p.expires_at > now())
		  AND p.workspace_id = @workspace AND `+a.callerMayAct,
		pgx.StrictNamedArgs{"file_id": fileID, "from": want.From, "if_digest": want.IfDigest, "redirect": want.Redirect, "chunk": int64(ChunkBytes)}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256,
				&r.CreatedAt, &r.FetchedAt, &r.AckedAt, &r.ExpiresAt, &key, &r.content, &stamped); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err := a.send(ctx, fmt.Sprintf("fetch %s", fileID), &b); err != nil {
		return Fetched{}, err
	}
	if !found {
		return Fetched{}, ErrNotFound
	}
	if key != nil {
		r.s3Key = *key
	}
	if !stamped && want.sends(r) {
		// Servable, yet not stamped: the row changed under the statement.
		return Fetched{}, ErrNotFound
	}
	if r.s3Key == "" && r.content != nil && int64(len(r.content)) != r.SizeBytes {
		return Fetched{}, fmt.Errorf("fetch %s: row holds %d bytes, says %d", fileID, len(r.content), r.SizeBytes)
	}
	return Fetched{Record: r, file: fileID, by: a}, nil
}

// FetchLinked is Fetch for the holder of a download link, who presents no
// credential: link, which only downloadlink's Check makes (signed by this
// deployment, unexpired), is the caller's check, for exactly its file of
// exactly its workspace (linkAccess): no identity stands in for it, and
// the Fetched it returns opens that file alone. A zero link is
// ErrNotFound before any I/O. The file must still be servable, as for
// Fetch, with the same stamp of fetched_at and the same errors; the
// Fetched it returns is what Open reads.
func (s *Store) FetchLinked(ctx context.Context, link downloadlink.Verified, want Want) (Fetched, error) {
	if link.IsZero() {
		return Fetched{}, ErrNotFound
	}
	// The link is the check: its round trip carries no token look-up,
	// and every statement reads the link's workspace and file only.
	return s.fetch(ctx, s.linkAccess(link), link.File(), want)
}

// linkAccess is the access a download link grants, made from the
// Verified link alone: its workspace, and its file (access.file), the
// one file fetch, Open and SignGet will read with it. Its statements
// carry no token look-up: the link's signature, checked by downloadlink,
// was the check.
func (s *Store) linkAccess(link downloadlink.Verified) *access {
	return &access{s: s, ws: link.Workspace(), file: link.File(), trusted: true, callerMayAct: tokenSchema{}.mayActSQL()}
}

// Open returns n bytes of f's file from offset off (0 ≤ off, off+n ≤
// f.SizeBytes), from the row or from the blob store, for f as Fetch
// returned it (else ErrNotFetched, before any I/O). It checks that the
// bytes are there, and flow, before it returns: a file swept since Fetch
// gives ErrNotFound, and a dependency that stalls before the first bytes
// (ChunkBytes of a row, firstBytes of an object) an error, so that a
// caller never starts an answer it cannot finish. Reading then yields
// exactly n bytes, or an error. Close the reader.
// Each chunk read from a row names Fetch's callerMayAct again.
//
// A large inline file is read ChunkBytes at a time inside one read-only
// REPEATABLE READ transaction: every chunk comes from the same snapshot,
// in which the row stays whole even if a sweep deletes it meanwhile. The
// transaction holds a connection until Close.
func (s *Store) Open(ctx context.Context, f Fetched, off, n int64) (Body, error) {
	by, err := f.checked("open")
	if err != nil {
		return Body{}, err
	}
	r := f.Record
	if off < 0 || n < 0 || off+n > r.SizeBytes {
		return Body{}, fmt.Errorf("open %s: range %d+%d outside %d bytes", r.FileID, off, n, r.SizeBytes)
	}
	if r.s3Key != "" {
		if s.bucket == nil {
			return Body{}, fmt.Errorf("open %s: %w", r.FileID, ErrNoBucket)
		}
		body, err := s.bucket.Open(ctx, r.s3Key, off, n)
		if errors.Is(err, ErrBlobNotFound) {
			return Body{}, ErrNotFound
		}
		if err != nil {
			return Body{}, wrap(fmt.Sprintf("open %s", r.FileID), err)
		}
		// The first bytes now, as for a row: a bucket that sent the
		// object's headers and then nothing (frozen between the two)
		// fails here, within the caller's deadline and before it has
		// answered anything, not once its answer has begun.
		br := bufio.NewReaderSize(body, firstBytes)
		if _, err := br.Peek(int(min(n, firstBytes))); err != nil && !errors.Is(err, io.EOF) {
			body.Close()
			return Body{}, wrap(fmt.Sprintf("open %s: first bytes", r.FileID), err)
		}
		return Body{ReadCloser: readCloser{Reader: br, Closer: body}}, nil
	}
	if r.content != nil {
		return Body{ReadCloser: &memReader{b: r.content[off : off+n]}, InMemory: true}, nil
	}
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Body{}, wrap(fmt.Sprintf("open %s", r.FileID), err)
	}
	rr := &rowReader{ctx: ctx, tx: tx, by: by, file: f.file, r: r, off: off, end: off + n}
	// The first chunk now: a row swept since Fetch is ErrNotFound here,
	// before the caller has answered anything.
	if err := rr.fill(); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return Body{}, err
	}
	return Body{ReadCloser: rr}, nil
}

// firstBytes is how much of a bucket-held file Open reads before it
// returns.
const firstBytes = 64 << 10

// readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// Body is a file's bytes as Open returns them: read them, then close
// them. InMemory says they came with the row: reading them cannot stall
// on a dependency, and they are written in one call (the reader is an
// io.WriterTo).
type Body struct {
	io.ReadCloser
	InMemory bool
}

// presignGetTTL is how long a redirect's presigned GET lives.
const presignGetTTL = 5 * time.Minute

// SignGet returns a presigned GET of f's object whose answer carries the
// given Content-Disposition and Content-Type, for f as Fetch returned it
// (else ErrNotFetched, before any I/O); ok is false, with no error, for
// a file that is not in the bucket.
func (s *Store) SignGet(ctx context.Context, f Fetched, disposition, contentType string) (url string, ok bool, err error) {
	if _, err := f.checked("sign get"); err != nil {
		return "", false, err
	}
	r := f.Record
	if r.s3Key == "" || s.bucket == nil {
		return "", false, nil
	}
	url, err = s.bucket.PresignGet(ctx, r.s3Key, disposition, contentType, presignGetTTL)
	if err != nil {
		return "", false, wrap(fmt.Sprintf("sign get %s", r.FileID), err)
	}
	return url, true, nil
}

// rowReader reads an inline file's bytes chunk by chunk in one snapshot.
type rowReader struct {
	ctx      context.Context
	tx       pgx.Tx
	by       *access   // Fetch's check, named again by each chunk's statement
	file     uuid.UUID // the file Fetch read (Fetched.file)
	r        Record
	off, end int64
	buf      []byte
}

func (rr *rowReader) fill() error {
	want := min(int64(ChunkBytes), rr.end-rr.off)
	if want == 0 {
		return nil
	}
	var chunk []byte
	args, err := rr.by.args(pgx.StrictNamedArgs{"file_id": rr.file, "from": rr.off + 1, "n": want})
	if err != nil {
		return err
	}
	err = rr.tx.QueryRow(rr.ctx, `
		SELECT substring(content FROM @from FOR @n) FROM pending_uploads
		WHERE file_id = @file_id AND workspace_id = @workspace AND `+rr.by.callerMayAct, args).Scan(&chunk)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return wrap(fmt.Sprintf("read %s at %d", rr.r.FileID, rr.off), err)
	}
	if int64(len(chunk)) != want {
		return fmt.Errorf("read %s at %d: got %d bytes, want %d", rr.r.FileID, rr.off, len(chunk), want)
	}
	rr.buf = chunk
	rr.off += want
	return nil
}
func (rr *rowReader) Read(p []byte) (int, error) {
	if len(rr.buf) == 0 {
		if rr.off >= rr.end {
			return 0, io.EOF
		}
		if err := rr.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, rr.buf)
	rr.buf = rr.buf[n:]
	return n, nil
}
func (m *memReader) Read(p []byte) (int, error) {
	if len(m.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, m.b)
	m.b = m.b[n:]
	return n, nil
}

// Close ends the read-only transaction.
func (rr *rowReader) Close() error {
	return rr.tx.Rollback(context.WithoutCancel(rr.ctx))
}
func (m *memReader) Close() error { return nil }

// memReader serves bytes already in memory: as a WriterTo, it hands them
// to the writer in one call, with no copy buffer.
type memReader struct{ b []byte }

func (m *memReader) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(m.b)
	m.b = m.b[n:]
	return int64(n), err
}
