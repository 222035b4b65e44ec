package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// A file above the server's multipart threshold goes to the bucket in
// parts: Presign declares each part's SHA-256 and gets a PartPlan,
// PutPresigned sends the parts PartsInFlight at once, Commit completes
// the upload. After a crash or a cancel, ResumeUpload asks the server
// which parts the bucket holds (the bucket's word, never the client's),
// sends the others and commits; AbortUpload drops the upload instead.

// DefaultPartsInFlight is the number of parts of one file PUT at once
// when Client.PartsInFlight is 0.
const DefaultPartsInFlight = 4

// ErrUploadGone is returned (wrapping the server's 404) by ResumeUpload
// for an upload the server no longer has: expired (an hour after its
// presign), aborted, or unknown to this workspace. Nothing of it can be
// committed; upload the file again.
var ErrUploadGone = errors.New("the server no longer has this upload (expired, aborted, or another workspace's)")

// PartPlan is how a file in parts goes to the bucket (wire's): PartCount
// parts of PartBytes, the parts the bucket holds (Received), and a
// presigned PUT of each other part.
type PartPlan = wire.PartPlan

// ReceivedPart is a part the bucket holds.
type ReceivedPart = wire.ReceivedPart

// PresignedPart is the presigned PUT of one part: send its Size bytes,
// starting at (PartNumber-1) × PartBytes, with Method to URL with exactly
// Headers.
type PresignedPart = wire.PresignedPart

// partURLRefresh is how long before its URLs expire a plan is renewed
// before a part is sent (a PUT that starts late is refused by the
// bucket, and the client's clock may be a little off the server's).
const partURLRefresh = 2 * time.Minute

func (c *Client) partsInFlight() int {
	if c.PartsInFlight > 0 {
		return c.PartsInFlight
	}
	return DefaultPartsInFlight
}

// checkPlan checks that m fits a file of size bytes: its part count, and
// each part's number and size.
func checkPlan(m *PartPlan, size int64) error {
	if m.PartBytes <= 0 || m.PartCount != int((size+m.PartBytes-1)/m.PartBytes) {
		return fmt.Errorf("the server's plan (%d parts of %d bytes) does not fit the file's %d bytes", m.PartCount, m.PartBytes, size)
	}
	for _, r := range m.Received {
		if r.PartNumber < 1 || r.PartNumber > m.PartCount {
			return fmt.Errorf("the server holds part %d of %d", r.PartNumber, m.PartCount)
		}
	}
	for _, p := range m.Parts {
		if p.PartNumber < 1 || p.PartNumber > m.PartCount || p.Size != partSize(m, size, p.PartNumber) || p.URL == "" {
			return fmt.Errorf("the server's part %d (%d bytes) does not fit the file's %d bytes in parts of %d", p.PartNumber, p.Size, size, m.PartBytes)
		}
		if v, ok := headerValue(p.Headers, "Content-Length"); ok && v != fmt.Sprint(p.Size) {
			return fmt.Errorf("part %d presigned for %s bytes, it has %d", p.PartNumber, v, p.Size)
		}
	}
	return nil
}

// partSize is the size of part n (from 1) of a file of size bytes.
func partSize(m *PartPlan, size int64, n int) int64 {
	return min(m.PartBytes, size-int64(n-1)*m.PartBytes)
}

// putParts sends the parts of p's plan, PartsInFlight at once.
func (c *Client) putParts(ctx context.Context, p PresignedUpload, f UploadFile) error {
	if err := checkPlan(p.Multipart, f.Size); err != nil {
		return fmt.Errorf("put %s: %w", f.Name, err)
	}
	var held int64
	for _, r := range p.Multipart.Received {
		held += r.Size
	}
	prog := newProgress(f, held)
	urls := &partURLs{c: c, up: p, size: f.Size}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.partsInFlight())
	for _, part := range p.Multipart.Parts {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return c.putPart(gctx, urls, part, f, prog) })
	}
	err := g.Wait()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("put %s: %w", f.Name, context.Cause(ctx))
	}
	return err
}

// putPart sends one part, retried per Retry; a PUT the bucket refuses
// with 403 (its URL expired, or the clocks disagree) is sent once more
// with a fresh URL, when the plan can be renewed.
func (c *Client) putPart(ctx context.Context, urls *partURLs, part PresignedPart, f UploadFile, prog *progress) error {
	op := fmt.Sprintf("put %s part %d", f.Name, part.PartNumber)
	count := tries{p: prog}
	for renewed := false; ; renewed = true {
		cur, ok, err := urls.get(ctx, part.PartNumber, renewed)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if !ok {
			return nil // the bucket holds it already
		}
		u, err := c.redirectTarget(c.baseURL.String(), cur.URL)
		if err != nil {
			return fmt.Errorf("%s: presigned URL: %w", op, err)
		}
		method := cur.Method
		if method == "" {
			method = http.MethodPut
		}
		off := int64(part.PartNumber-1) * urls.partBytes()
		body := func() (io.ReadCloser, error) { return count.wrap(&sectionFile{f: f, off: off, size: cur.Size}), nil }
		resp, err := c.send(ctx, request{
			method: method, url: u, body: body, size: cur.Size, header: cur.Headers,
			auth: false, retry: true, op: op,
		})
		if hasStatus(err, http.StatusForbidden) && !renewed && urls.renewable() {
			continue
		}
		if err != nil {
			return err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: the bucket answered %s", op, resp.Status)
		}
		return nil
	}
}

// partURLs hands out the current presigned PUT of each part of one
// upload, renewing the plan (ResumePresign) when its URLs are about to
// expire. Safe for concurrent use.
type partURLs struct {
	c    *Client
	size int64

	mu sync.Mutex
	up PresignedUpload
}

func (u *partURLs) partBytes() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.up.Multipart.PartBytes
}

func (u *partURLs) renewable() bool { return u.up.ws != uuid.Nil }

// get returns part n's PUT, renewed first if force or if it expires
// soon; ok is false when a renewed plan no longer lists the part (the
// bucket holds it).
func (u *partURLs) get(ctx context.Context, n int, force bool) (PresignedPart, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	stale := !u.up.ExpiresAt.IsZero() && time.Until(u.up.ExpiresAt) < partURLRefresh
	if (force || stale) && u.renewable() {
		fresh, err := u.c.ResumePresign(ctx, u.up.ws, u.up.UploadID)
		if err != nil {
			return PresignedPart{}, false, fmt.Errorf("renew the part URLs: %w", err)
		}
		if fresh.Multipart == nil {
			return PresignedPart{}, false, errors.New("renew the part URLs: the server answered a plan of one PUT")
		}
		if err := checkPlan(fresh.Multipart, u.size); err != nil {
			return PresignedPart{}, false, fmt.Errorf("renew the part URLs: %w", err)
		}
		u.up = fresh
	}
	for _, p := range u.up.Multipart.Parts {
		if p.PartNumber == n {
			return p, true, nil
		}
	}
	return PresignedPart{}, false, nil
}

// sectionFile yields the size bytes of an UploadFile from offset off: it
// opens the file on first read (seeking there, or reading up to it), and
// fails if the file ends early.
type sectionFile struct {
	f         UploadFile
	off, size int64
	rc        io.ReadCloser
	r         io.Reader
	n         int64
}

func (s *sectionFile) Read(p []byte) (int, error) {
	if s.r == nil {
		rc, err := s.f.Open()
		if err != nil {
			return 0, fmt.Errorf("open %s: %w", s.f.Name, err)
		}
		s.rc = rc
		if sk, ok := rc.(io.Seeker); ok {
			_, err = sk.Seek(s.off, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, rc, s.off)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: to byte %d: %w", s.f.Name, s.off, err)
		}
		s.r = io.LimitReader(rc, s.size)
	}
	k, err := s.r.Read(p)
	s.n += int64(k)
	if err == io.EOF && s.n < s.size {
		return k, fmt.Errorf("%s: shrank while being sent (%d of %d bytes from byte %d)", s.f.Name, s.n, s.size, s.off)
	}
	return k, err
}

func (s *sectionFile) Close() error {
	if s.rc != nil {
		return s.rc.Close()
	}
	return nil
}

// ResumePresign asks the server about the upload in parts uploadID of
// ws, not committed yet: the plan with the parts the bucket holds
// (Received) and fresh presigned PUTs of the others. Errors: a 404
// (IsNotFound) for an upload the server no longer has; a 409
// upload_committed (see ResumeUpload). It is retried per Retry.
func (c *Client) ResumePresign(ctx context.Context, ws, uploadID uuid.UUID) (PresignedUpload, error) {
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads", "presign", uploadID.String()),
		auth: true, retry: true, op: "resume",
	})
	if err != nil {
		return PresignedUpload{}, err
	}
	var p wire.PresignedUpload
	if err := decodeJSON(resp, "resume", &p); err != nil {
		return PresignedUpload{}, err
	}
	if p.UploadID != uploadID || p.Multipart == nil {
		return PresignedUpload{}, fmt.Errorf("resume: the server answered another upload (%s) or no plan of parts", p.UploadID)
	}
	return PresignedUpload{PresignedUpload: p, ws: ws}, nil
}

// ResumeUpload finishes the upload in parts uploadID of ws, whose bytes
// are f (the same file that was presigned: same size, same bytes): it
// asks which parts the bucket holds (and tells f.OnPresigned), sends only
// the others (as PutPresigned does), and commits. An upload committed already (its
// commit's answer lost, or a process that died before it recorded the
// answer) is answered with the file that commit stored. An upload the
// server no longer has is an error wrapping ErrUploadGone (and the 404).
// A commit that fails otherwise (a 503: the server's deadline, its
// storage) is that error, never ErrUploadGone: the parts a failed commit
// assembled stay, and the next ResumeUpload sends none of them again.
// Ending ctx stops it with the bucket's parts kept: it may be resumed
// again.
func (c *Client) ResumeUpload(ctx context.Context, ws, uploadID uuid.UUID, f UploadFile) (StagedFile, error) {
	p, err := c.ResumePresign(ctx, ws, uploadID)
	switch {
	case isCommitted(err):
		return c.commitOne(ctx, ws, uploadID)
	case IsNotFound(err):
		// A server older than this client says 404 for an upload whose
		// parts a commit assembled, then failed: such an upload is still
		// committed whole. Only the commit's word that it has no such
		// upload (404, upload_not_received) makes it gone; a commit that
		// failed otherwise (a 503) leaves it to resume again.
		s, cerr := c.commitOne(ctx, ws, uploadID)
		switch {
		case cerr == nil:
			return s, nil
		case IsNotFound(cerr) || ErrorCode(cerr) == wire.CodeUploadNotReceived:
			return StagedFile{}, fmt.Errorf("resume %s: %w (%w)", f.Name, ErrUploadGone, err)
		default:
			return StagedFile{}, fmt.Errorf("resume %s: %w", f.Name, cerr)
		}
	case err != nil:
		return StagedFile{}, err
	}
	if f.OnPresigned != nil {
		if err := f.OnPresigned(p); err != nil {
			return StagedFile{}, fmt.Errorf("resume %s: %w", f.Name, err)
		}
	}
	if err := c.PutPresigned(ctx, p, f); err != nil {
		return StagedFile{}, err
	}
	return c.commitOne(ctx, ws, uploadID)
}

func (c *Client) commitOne(ctx context.Context, ws, uploadID uuid.UUID) (StagedFile, error) {
	staged, err := c.Commit(ctx, ws, []uuid.UUID{uploadID})
	if err != nil {
		return StagedFile{}, err
	}
	return staged[0], nil
}

// isCommitted reports whether err is resume's or abort's refusal of an
// upload a commit took already (upload_committed).
func isCommitted(err error) bool { return ErrorCode(err) == wire.CodeUploadCommitted }

// AbortUpload drops the presigned upload uploadID of ws, not committed
// yet: the parts (or the object) the bucket holds, and the server's
// promise, so that no commit can take it. Nothing else does: a cancelled
// or crashed upload stays resumable until it expires. A 404
// (IsNotFound) means there is nothing (any more) to abort; an upload
// committed already is a 409 upload_committed. It is retried per Retry.
func (c *Client) AbortUpload(ctx context.Context, ws, uploadID uuid.UUID) error {
	resp, err := c.send(ctx, request{
		method: "DELETE", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads", "presign", uploadID.String()),
		auth: true, retry: true, op: "abort",
	})
	if err != nil {
		return err
	}
	var out wire.AbortAnswer
	if err := decodeJSON(resp, "abort", &out); err != nil {
		return err
	}
	if !out.Aborted {
		return errors.New("abort: the server did not say aborted")
	}
	return nil
}
