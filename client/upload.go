package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/humanize"
	"github.com/pendinguploads/pendinguploads/client/wire"
)

// Upload plans what goes how: files that fit the request cap go as
// multipart/form-data requests (multipart.go), larger ones through
// presign, a PUT to the bucket and a commit (presign.go), in parts for a
// file above the server's multipart threshold (parts.go).

// UploadFile is one file to stage.
type UploadFile struct {
	// Name is the file's name; the server sanitizes it.
	Name string
	// MimeType is sent as the file's Content-Type ("": application/octet-stream).
	MimeType string
	// Size is the exact number of bytes Open yields.
	Size int64
	// Open returns the bytes. It may be called more than once (a request
	// the server refused before storing anything is sent again, a
	// presigned PUT is retried, each part of a file sent in parts opens
	// it, several at once); each reader is closed. A part starts where
	// the reader seeks to (an io.Seeker, as *os.File) or, if it does not,
	// after the bytes before it are read and dropped.
	Open func() (io.ReadCloser, error)

	// Progress, if set, is told how many of the file's bytes have been
	// sent so far, as they go (the parts the bucket held already, for a
	// resumed upload, count as sent). Calls never overlap. A request that
	// is sent again takes its bytes back first, so the count may go down.
	Progress func(sent int64)
	// OnPresigned, if set, is called with the file's presigned upload
	// once the server has made it, before any of its bytes are sent:
	// what a caller that wants to resume after a crash records (the
	// UploadID of an upload in parts, for ResumeUpload). ResumeUpload
	// calls it too, with the renewed plan, whose Multipart.Received lists
	// the parts the bucket holds already. An error stops the upload
	// there, before any PUT.
	OnPresigned func(PresignedUpload) error
}

// FileFromPath describes the regular file at path: its base name, its
// size, and a MIME type guessed from its name, and from its first bytes
// where the name says nothing or misleads (go.mod, go.sum and a text
// file without an extension are text/plain).
func FileFromPath(path string) (UploadFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return UploadFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return UploadFile{}, fmt.Errorf("%s: not a regular file", path)
	}
	mt := typeOfFile(path)
	return UploadFile{
		Name:     filepath.Base(path),
		MimeType: mt,
		Size:     fi.Size(),
		Open:     func() (io.ReadCloser, error) { return os.Open(path) },
	}, nil
}

// BytesFile is an UploadFile of b.
func BytesFile(name, mimeType string, b []byte) UploadFile {
	return UploadFile{Name: name, MimeType: mimeType, Size: int64(len(b)),
		Open: func() (io.ReadCloser, error) { return bytesReader{bytes.NewReader(b)}, nil }}
}

// bytesReader is a *bytes.Reader that closes: a seekable reader, so that
// each part of a file sent in parts starts where it is.
type bytesReader struct{ *bytes.Reader }

func (bytesReader) Close() error { return nil }

// StagedFile is one file of an upload's success answer.
type StagedFile = wire.StagedFile

// Upload stages files for ws and returns them, in the order given.
//
// Files that fit the request cap (MaxRequestBytes until a 413 from the
// server names the real one) go as multipart/form-data, packed into as few
// requests as the cap and the 64-file limit allow. Larger files go through
// presign, a PUT straight to the bucket (in parts, PartsInFlight at once,
// for a file above the server's multipart threshold), and a JSON commit.
// When the
// server does not offer presign (404), a large file is sent as multipart
// on its own, which works where the server's cap was raised; if it still
// does not fit, the error wraps ErrTooLarge. Empty files and files over
// the server's per-file cap are refused before any upload request: the cap
// is MaxFileBytes unless a file is larger, and then the one the server
// announces at GET /uploads/limits (asked once; MaxFileBytes from a server
// without that route).
//
// Each request is atomic on the server, but several requests are not: on
// an error, the files staged by earlier requests are returned with it.
// Multipart requests are not retried (see RetryPolicy). An upload in
// parts stopped by ctx, or by a failure, stays resumable (ResumeUpload,
// with the UploadID OnPresigned gave) until it expires.
func (c *Client) Upload(ctx context.Context, ws uuid.UUID, files []UploadFile) ([]StagedFile, error) {
	if err := c.checkFiles(ctx, files); err != nil {
		return nil, err
	}
	u := &uploader{c: c, ws: ws, files: files, out: make([]*StagedFile, len(files))}
	pending := make([]int, len(files))
	for i := range files {
		pending[i] = i
	}
	for len(pending) > 0 {
		limit := c.maxRequest()
		var err error
		if pending, err = u.send(ctx, planUpload(files, pending, limit), limit); err != nil {
			return u.staged(), err
		}
	}
	return u.staged(), nil
}

// checkFiles refuses, before any upload request, what the server would:
// no files, a file without Open, an empty file, a file over the per-file
// cap. The server's cap is asked for only when a file is over the default
// one: smaller files cost no extra request (a lower cap answers 413).
func (c *Client) checkFiles(ctx context.Context, files []UploadFile) error {
	fileCap := int64(MaxFileBytes)
	for _, f := range files {
		if f.Size > fileCap {
			fileCap = c.fileCap(ctx)
			break
		}
	}
	for _, f := range files {
		if f.Open == nil {
			return fmt.Errorf("upload %s: no Open", f.Name)
		}
		if f.Size <= 0 {
			return fmt.Errorf("upload %s: empty file (the server refuses those)", f.Name)
		}
		if f.Size > fileCap {
			return fmt.Errorf("upload %s: %w: %s is over the per-file cap of %s", f.Name, ErrTooLarge, humanize.Bytes(f.Size), humanize.Bytes(fileCap))
		}
	}
	if len(files) == 0 {
		return errors.New("upload: no files")
	}
	return nil
}

// uploadPlan is how a set of files (indexes into Upload's files) goes
// under a request cap: multipart requests packed within the cap and
// MaxFilesPerRequest, in order; and the files too large for any request.
type uploadPlan struct {
	batches [][]int
	large   []int
}

// planUpload plans the files pending under the request cap limit.
func planUpload(files []UploadFile, pending []int, limit int64) uploadPlan {
	var p uploadPlan
	var small []int
	for _, i := range pending {
		if multipartLen(files[i:i+1]) <= limit {
			small = append(small, i)
		} else {
			p.large = append(p.large, i)
		}
	}
	p.batches = packBatches(files, small, limit)
	return p
}

// uploader sends plans and keeps what they staged, by file.
type uploader struct {
	c          *Client
	ws         uuid.UUID
	files      []UploadFile
	out        []*StagedFile
	presignOff bool // the server answered presign with 404: no bucket
}

// staged is what was staged so far, in the files' order.
func (u *uploader) staged() []StagedFile {
	var s []StagedFile
	for _, f := range u.out {
		if f != nil {
			s = append(s, *f)
		}
	}
	return s
}

func (u *uploader) keep(idx []int, staged []StagedFile) {
	for k, i := range idx {
		u.out[i] = &staged[k]
	}
}

// send sends plan, made under the cap limit: the multipart batches, then
// the large files through presign, or (no presign) each alone as
// multipart, in case the server's cap is larger than believed. It
// returns the files to plan again: after a 413 that lowered the cap (all
// not sent yet), or when presign turns out not to be offered (the large
// files not sent yet).
func (u *uploader) send(ctx context.Context, plan uploadPlan, limit int64) ([]int, error) {
	for k, batch := range plan.batches {
		staged, err := u.c.UploadMultipart(ctx, u.ws, pick(u.files, batch))
		if err != nil {
			if u.c.learnCap(err, limit) {
				return append(slices.Concat(plan.batches[k:]...), plan.large...), nil
			}
			return nil, err
		}
		u.keep(batch, staged)
	}
	if u.presignOff {
		return nil, u.sendAlone(ctx, plan.large, limit)
	}
	for start := 0; start < len(plan.large); start += MaxFilesPerRequest {
		batch := plan.large[start:min(start+MaxFilesPerRequest, len(plan.large))]
		staged, err := u.c.UploadPresigned(ctx, u.ws, pick(u.files, batch))
		if errors.Is(err, ErrPresignNotOffered) {
			u.presignOff = true
			return plan.large[start:], nil
		}
		if err != nil {
			return nil, err
		}
		u.keep(batch, staged)
	}
	return nil, nil
}

// sendAlone sends each of large as a multipart request of its own.
func (u *uploader) sendAlone(ctx context.Context, large []int, limit int64) error {
	for _, i := range large {
		staged, err := u.c.UploadMultipart(ctx, u.ws, u.files[i:i+1])
		if err != nil {
			if IsTooLarge(err) {
				u.c.learnCap(err, limit)
				return fmt.Errorf("upload %s: %w: %s does not fit the server's request cap (%s) and the server offers no presigned uploads (no bucket configured): %w",
					u.files[i].Name, ErrTooLarge, humanize.Bytes(u.files[i].Size), humanize.Bytes(u.c.maxRequest()), err)
			}
			return err
		}
		u.keep([]int{i}, staged)
	}
	return nil
}

// learnCap takes the request cap from a 413 request_too_large answer. It
// reports whether the cap is now lower than was assumed, so that sending
// again, repacked, can succeed (a 413 stores nothing).
func (c *Client) learnCap(err error, assumed int64) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != wire.CodeRequestTooLarge {
		return false
	}
	m, ok := ae.Int("max")
	if !ok || m <= 0 {
		return false
	}
	c.learned.Store(m)
	return m < assumed
}

func pick(files []UploadFile, idx []int) []UploadFile {
	out := make([]UploadFile, len(idx))
	for k, i := range idx {
		out[k] = files[i]
	}
	return out
}

// packBatches groups the files idx (each fits alone) into requests under
// limit bytes and MaxFilesPerRequest files, in order.
func packBatches(files []UploadFile, idx []int, limit int64) [][]int {
	var out [][]int
	var cur []int
	for _, i := range idx {
		next := append(append([]int(nil), cur...), i)
		if len(cur) > 0 && (len(next) > MaxFilesPerRequest || multipartLen(pick(files, next)) > limit) {
			out = append(out, cur)
			next = []int{i}
		}
		cur = next
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
