package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/humanize"
	"github.com/pendinguploads/pendinguploads/wire"
)

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
	// UploadID of an upload in parts, for ResumeUpload). An error stops
	// the upload there, before any PUT.
	OnPresigned func(PresignedUpload) error
}

// FileFromPath describes the regular file at path: its base name, its
// size, and a MIME type guessed from the extension.
func FileFromPath(path string) (UploadFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return UploadFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return UploadFile{}, fmt.Errorf("%s: not a regular file", path)
	}
	mt := mime.TypeByExtension(filepath.Ext(path))
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
type StagedFile struct {
	FileID   uuid.UUID `json:"file_id"`
	URI      string    `json:"uri"`
	Name     string    `json:"name"`
	MimeType string    `json:"mimeType"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
}

type stagedBody struct {
	Files []StagedFile `json:"files"`
}

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

// learnCap takes the request cap from a 413 request_too_large answer. It reports whether the cap is now lower than was assumed, so
// that sending again, repacked, can succeed (a 413 stores nothing).
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

// multipartBody lays out a multipart/form-data body of files without
// reading them: the part headers between the files' bytes.
type multipartBody struct {
	contentType string
	heads       [][]byte // heads[i] precedes file i; heads[len(files)] closes
	size        int64
}

func layoutMultipart(files []UploadFile) multipartBody {
	var buf bytes.Buffer
	// A random boundary for each body (a file cannot break it on purpose);
	// its length is fixed, so sizes computed for packing hold.
	mw := multipart.NewWriter(&buf)
	mb := multipartBody{contentType: mw.FormDataContentType()}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="files"; filename="`+quoteName(f.Name)+`"`)
		mt := f.MimeType
		if mt == "" {
			mt = "application/octet-stream"
		}
		h.Set("Content-Type", strings.Map(dropControl, mt))
		_, _ = mw.CreatePart(h)
		mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
		mb.size += int64(buf.Len()) + f.Size
		buf.Reset()
	}
	_ = mw.Close()
	mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
	mb.size += int64(buf.Len())
	return mb
}

func multipartLen(files []UploadFile) int64 { return layoutMultipart(files).size }

func dropControl(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return '_'
	}
	return r
}

// quoteName escapes a file name for a quoted-string; control characters
// (CR/LF would end the header) become '_', as the server's sanitizer
// would make them anyway.
func quoteName(s string) string {
	s = strings.Map(dropControl, s)
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// UploadMultipart stages files for ws in one multipart/form-data request:
// all or nothing. It does not split, fall back, or retry; see Upload.
func (c *Client) UploadMultipart(ctx context.Context, ws uuid.UUID, files []UploadFile) ([]StagedFile, error) {
	mb := layoutMultipart(files)
	counts := make([]tries, len(files))
	for i, f := range files {
		counts[i].p = newProgress(f, 0)
	}
	body := func() (io.ReadCloser, error) {
		var rs []io.Reader
		var opened []*lazyFile
		for i, f := range files {
			lf := &lazyFile{f: f}
			opened = append(opened, lf)
			rs = append(rs, bytes.NewReader(mb.heads[i]), counts[i].wrap(lf))
		}
		rs = append(rs, bytes.NewReader(mb.heads[len(files)]))
		return &multiCloser{Reader: io.MultiReader(rs...), files: opened}, nil
	}
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads"),
		body: body, size: mb.size, contentType: mb.contentType, auth: true, op: "upload",
	})
	if err != nil {
		return nil, err
	}
	return readStaged(resp, "upload", len(files))
}

func readStaged(resp *http.Response, op string, n int) ([]StagedFile, error) {
	var sb stagedBody
	if err := decodeJSON(resp, op, &sb); err != nil {
		return nil, err
	}
	if len(sb.Files) != n {
		return nil, fmt.Errorf("%s: the server answered %d files for %d sent", op, len(sb.Files), n)
	}
	return sb.Files, nil
}

// lazyFile opens an UploadFile on first read, yields exactly Size bytes
// (an error if the file is shorter or longer now), and closes it at the end.
type lazyFile struct {
	f    UploadFile
	rc   io.ReadCloser
	n    int64
	done bool
}

func (l *lazyFile) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.rc == nil {
		rc, err := l.f.Open()
		if err != nil {
			return 0, fmt.Errorf("open %s: %w", l.f.Name, err)
		}
		l.rc = rc
	}
	if l.n == l.f.Size {
		var one [1]byte
		if k, _ := io.ReadFull(l.rc, one[:]); k > 0 {
			return 0, fmt.Errorf("%s: grew while being sent (want %d bytes)", l.f.Name, l.f.Size)
		}
		l.done = true
		l.rc.Close()
		return 0, io.EOF
	}
	if int64(len(p)) > l.f.Size-l.n {
		p = p[:l.f.Size-l.n]
	}
	k, err := l.rc.Read(p)
	l.n += int64(k)
	if err == io.EOF {
		if l.n < l.f.Size {
			return k, fmt.Errorf("%s: shrank while being sent (%d of %d bytes)", l.f.Name, l.n, l.f.Size)
		}
		err = nil
	}
	return k, err
}

func (l *lazyFile) Close() error {
	if l.rc != nil && !l.done {
		l.done = true
		return l.rc.Close()
	}
	return nil
}

type multiCloser struct {
	io.Reader
	files []*lazyFile
}

func (m *multiCloser) Close() error {
	for _, f := range m.files {
		f.Close()
	}
	return nil
}

// PresignedUpload is one file of the presign answer: for one PUT, send
// the file's bytes with Method to URL with exactly Headers, and no
// Authorization; for a file in parts (Multipart set), each part's bytes
// to its own URL (PutPresigned does either).
type PresignedUpload struct {
	UploadID  uuid.UUID         `json:"upload_id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt time.Time         `json:"expires_at"`
	// Multipart is the plan of a file that goes in parts; nil for one PUT.
	Multipart *PartPlan `json:"multipart"`

	// ws is the workspace the upload belongs to, when Presign or
	// ResumePresign made it: PutPresigned then asks for fresh part URLs
	// when these expire.
	ws uuid.UUID
}

type presignFile struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	MimeType  string    `json:"mimeType"`
	SHA256    string    `json:"sha256,omitempty"`
	Multipart bool      `json:"multipart,omitempty"`
	Parts     []partSum `json:"parts,omitempty"`
}

type partSum struct {
	SHA256 string `json:"sha256"`
}

// Presign asks for presigned uploads of files (1 to 64), in order. Each
// file is read once first, to declare its SHA-256: the bucket then takes
// exactly those bytes and no others, and the commit need not read them.
// A file above the server's multipart threshold (Limits, asked once) is
// declared in parts, each part's SHA-256 with it (the same single read,
// part by part): its answer is a PartPlan, each part's PUT bound to its
// part's bytes. A 404 (the server has no bucket) returns an error
// wrapping ErrPresignNotOffered. It is retried per Retry: nothing is
// visible to the workspace until Commit.
func (c *Client) Presign(ctx context.Context, ws uuid.UUID, files []UploadFile) ([]PresignedUpload, error) {
	req := struct {
		Files []presignFile `json:"files"`
	}{}
	for _, f := range files {
		pf := presignFile{Name: f.Name, Size: f.Size, MimeType: f.MimeType}
		partBytes := c.partBytes(ctx, f.Size)
		sum, parts, err := fileSums(ctx, f, partBytes)
		if err != nil {
			return nil, fmt.Errorf("presign: %w", err)
		}
		pf.SHA256 = sum
		if partBytes > 0 {
			pf.Multipart = true
			for _, p := range parts {
				pf.Parts = append(pf.Parts, partSum{p})
			}
		}
		req.Files = append(req.Files, pf)
	}
	body, size, err := jsonBody(req)
	if err != nil {
		return nil, fmt.Errorf("presign: %w", err)
	}
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads", "presign"),
		body: body, size: size, contentType: "application/json", auth: true, retry: true, op: "presign",
	})
	if err != nil {
		if IsNotFound(err) {
			return nil, fmt.Errorf("%w (%w)", ErrPresignNotOffered, err)
		}
		return nil, err
	}
	var pb struct {
		Uploads []PresignedUpload `json:"uploads"`
	}
	if err := decodeJSON(resp, "presign", &pb); err != nil {
		return nil, err
	}
	if len(pb.Uploads) != len(files) {
		return nil, fmt.Errorf("presign: the server answered %d uploads for %d files", len(pb.Uploads), len(files))
	}
	for i := range pb.Uploads {
		pb.Uploads[i].ws = ws
	}
	return pb.Uploads, nil
}

// fileSums reads f once through SHA-256 and returns the digest in hex
// and, when partBytes > 0, the digest of each part of partBytes (the last
// one shorter), in order. It holds one buffer, whatever the file's size.
// The file must hold exactly f.Size bytes.
func fileSums(ctx context.Context, f UploadFile, partBytes int64) (string, []string, error) {
	if f.Open == nil {
		return "", nil, fmt.Errorf("%s: no Open", f.Name)
	}
	rc, err := f.Open()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	r := &ctxReader{ctx: ctx, r: io.LimitReader(rc, f.Size+1)}
	whole := sha256.New()
	var parts []string
	var n int64
	if partBytes <= 0 {
		n, err = io.Copy(whole, r)
	} else {
		part := sha256.New()
		w := io.MultiWriter(whole, part)
		for n < f.Size && err == nil {
			part.Reset()
			var k int64
			k, err = io.CopyN(w, r, min(partBytes, f.Size-n))
			n += k
			if err == nil {
				parts = append(parts, hex.EncodeToString(part.Sum(nil)))
			}
		}
		if err == nil {
			var k int64
			k, err = io.Copy(io.Discard, r)
			n += k
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil // shorter than declared: told below
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if n != f.Size {
		return "", nil, fmt.Errorf("%s: holds %d bytes, %d declared", f.Name, n, f.Size)
	}
	return hex.EncodeToString(whole.Sum(nil)), parts, nil
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// PutPresigned sends f's bytes to the bucket as p says, with exactly the
// headers p gives and no Authorization: in one PUT, or, for a file in
// parts, each part p lists (the parts the bucket does not hold yet),
// PartsInFlight at once, each retried on its own per Retry (the same
// bytes to the same part); the first part that fails for good stops the
// others. Part URLs about to expire are renewed (ResumePresign) when p
// came from Presign or ResumePresign. Ending ctx stops the PUTs in
// flight: what the bucket holds stays, for ResumeUpload.
func (c *Client) PutPresigned(ctx context.Context, p PresignedUpload, f UploadFile) error {
	if p.Multipart != nil {
		return c.putParts(ctx, p, f)
	}
	method := p.Method
	if method == "" {
		method = http.MethodPut
	}
	u, err := c.redirectTarget(c.baseURL.String(), p.URL)
	if err != nil {
		return fmt.Errorf("put %s: presigned URL: %w", f.Name, err)
	}
	if v, ok := headerValue(p.Headers, "Content-Length"); ok && v != fmt.Sprint(f.Size) {
		return fmt.Errorf("put %s: presigned for %s bytes, the file has %d", f.Name, v, f.Size)
	}
	count := tries{p: newProgress(f, 0)}
	body := func() (io.ReadCloser, error) { return count.wrap(&lazyFile{f: f}), nil }
	resp, err := c.send(ctx, request{
		method: method, url: u, body: body, size: f.Size, header: p.Headers,
		auth: false, retry: true, op: "put " + f.Name,
	})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("put %s: the bucket answered %s", f.Name, resp.Status)
	}
	return nil
}

// Commit stages the presigned uploads ids, all or nothing (form B of the
// upload route). An object that did not arrive (or a part of it) is a
// 409 *APIError with the field "upload_id". It is retried per Retry: a
// commit whose uploads this workspace all committed before answers the
// same files again and stores nothing, so an answer lost on the way is
// asked for again.
func (c *Client) Commit(ctx context.Context, ws uuid.UUID, ids []uuid.UUID) ([]StagedFile, error) {
	type item struct {
		UploadID uuid.UUID `json:"upload_id"`
	}
	req := struct {
		Files []item `json:"files"`
	}{}
	for _, id := range ids {
		req.Files = append(req.Files, item{id})
	}
	body, size, err := jsonBody(req)
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads"),
		body: body, size: size, contentType: "application/json", auth: true, retry: true, op: "commit",
	})
	if err != nil {
		return nil, err
	}
	return readStaged(resp, "commit", len(ids))
}

// UploadPresigned stages files (1 to 64) through presign, a PUT of each
// to the bucket (in parts for a file above the server's multipart
// threshold), and one commit: all or nothing. Each file's OnPresigned is
// called once all are presigned, before the first PUT. It returns an
// error wrapping ErrPresignNotOffered when the server has no bucket.
func (c *Client) UploadPresigned(ctx context.Context, ws uuid.UUID, files []UploadFile) ([]StagedFile, error) {
	ups, err := c.Presign(ctx, ws, files)
	if err != nil {
		return nil, err
	}
	for i, p := range ups {
		if files[i].OnPresigned != nil {
			if err := files[i].OnPresigned(p); err != nil {
				return nil, fmt.Errorf("upload %s: %w", files[i].Name, err)
			}
		}
	}
	ids := make([]uuid.UUID, len(ups))
	for i, p := range ups {
		if err := c.PutPresigned(ctx, p, files[i]); err != nil {
			return nil, err
		}
		ids[i] = p.UploadID
	}
	return c.Commit(ctx, ws, ids)
}

func headerValue(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
