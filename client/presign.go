package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// Presigned uploads: Presign declares the files (and their SHA-256s),
// PutPresigned sends each file's bytes straight to the bucket in one PUT
// (or in parts, parts.go), Commit stages them.

// PresignedUpload is one file of the presign answer (wire's): for one
// PUT, send the file's bytes with Method to URL with exactly Headers, and
// no Authorization; for a file in parts (Multipart set), each part's
// bytes to its own URL (PutPresigned does either).
type PresignedUpload struct {
	wire.PresignedUpload

	// ws is the workspace the upload belongs to, when Presign or
	// ResumePresign made it: PutPresigned then asks for fresh part URLs
	// when these expire.
	ws uuid.UUID
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
	var req wire.PresignRequest
	for _, f := range files {
		pf := wire.PresignFile{Name: f.Name, Size: f.Size, MimeType: f.MimeType}
		partBytes := c.partBytes(ctx, f.Size)
		sum, parts, err := fileSums(ctx, f, partBytes)
		if err != nil {
			return nil, fmt.Errorf("presign: %w", err)
		}
		pf.SHA256 = sum
		if partBytes > 0 {
			pf.Multipart = true
			for _, p := range parts {
				pf.Parts = append(pf.Parts, wire.PartSum{SHA256: p})
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
	var pb wire.PresignAnswer
	if err := decodeJSON(resp, "presign", &pb); err != nil {
		return nil, err
	}
	if len(pb.Uploads) != len(files) {
		return nil, fmt.Errorf("presign: the server answered %d uploads for %d files", len(pb.Uploads), len(files))
	}
	ups := make([]PresignedUpload, len(pb.Uploads))
	for i, p := range pb.Uploads {
		ups[i] = PresignedUpload{PresignedUpload: p, ws: ws}
	}
	return ups, nil
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
// 409 *APIError upload_not_received with the field "upload_id". It is retried per Retry: a
// commit whose uploads this workspace all committed before answers the
// same files again and stores nothing, so an answer lost on the way is
// asked for again.
func (c *Client) Commit(ctx context.Context, ws uuid.UUID, ids []uuid.UUID) ([]StagedFile, error) {
	var req wire.CommitRequest
	for _, id := range ids {
		req.Files = append(req.Files, wire.CommitFile{UploadID: id.String()})
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
