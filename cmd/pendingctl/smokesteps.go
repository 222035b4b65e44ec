package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/humanize"
	"github.com/pendinguploads/pendinguploads/client/wire"
)

// The steps of pendingctl smoke (smoke.go runs them in order), each
// answering the line its row shows.

func (s *smoke) checkLimits(ctx context.Context) (string, error) {
	l, err := s.c.Limits(ctx)
	if err != nil {
		return "", err
	}
	if l.PerFileBytes <= 0 || l.PerRequestBytes <= 0 {
		return "", fmt.Errorf("limits: per_file_bytes %d and per_request_bytes %d, want both positive", l.PerFileBytes, l.PerRequestBytes)
	}
	s.limits = l
	d := fmt.Sprintf("per file %s, per request %s", humanize.Bytes(l.PerFileBytes), humanize.Bytes(l.PerRequestBytes))
	switch {
	case !l.Presign:
		d += ", no presign (no bucket)"
	case l.MultipartThresholdBytes > 0:
		d += fmt.Sprintf(", presign, parts of %s above %s", humanize.Bytes(l.MultipartPartBytes), humanize.Bytes(l.MultipartThresholdBytes))
	default:
		d += ", presign, no parts"
	}
	return d, nil
}

// noParts says why this server takes no file in parts, or "".
func (s *smoke) noParts() string {
	l := s.limits
	switch {
	case !l.Presign:
		return "the server has no bucket (limits: presign false): no file goes in parts"
	case l.MultipartThresholdBytes <= 0 || l.MultipartPartBytes <= 0:
		return "the server takes no parts (limits: no multipart threshold)"
	case l.MultipartThresholdBytes+1 > l.PerFileBytes:
		return fmt.Sprintf("the multipart threshold (%s) is the per-file cap: no file goes in parts", humanize.Bytes(l.MultipartThresholdBytes))
	}
	return ""
}

func (s *smoke) upload(ctx context.Context) (string, error) {
	staged, err := s.c.Upload(ctx, s.ws, []client.UploadFile{s.small.f})
	for _, f := range staged {
		s.unacked = append(s.unacked, f.FileID)
	}
	if err != nil {
		return "", err
	}
	if err := s.small.check(staged[0]); err != nil {
		return "", err
	}
	s.small.staged = staged[0]
	return fmt.Sprintf("%s (%s) staged as %s", staged[0].Name, humanize.Bytes(staged[0].Size), staged[0].FileID), nil
}

// check holds what the server answered for the staged file to what was
// sent.
func (f *sentFile) check(got client.StagedFile) error {
	if got.Size != f.f.Size || got.SHA256 != hex.EncodeToString(f.sum[:]) {
		return fmt.Errorf("the server staged %s as %d bytes with SHA-256 %s; sent %d bytes with %x", got.FileID, got.Size, got.SHA256, f.f.Size, f.sum)
	}
	return nil
}

func (s *smoke) list(ctx context.Context) (string, error) {
	files, err := s.c.List(ctx, s.ws)
	if err != nil {
		return "", err
	}
	want := s.small.staged
	for _, f := range files {
		if f.FileID != want.FileID {
			continue
		}
		if f.Size != want.Size || f.SHA256 != want.SHA256 || f.Name != want.Name {
			return "", fmt.Errorf("the list shows %s as %q, %d bytes, SHA-256 %s; staged as %q, %d bytes, %s", f.FileID, f.Name, f.Size, f.SHA256, want.Name, want.Size, want.SHA256)
		}
		return fmt.Sprintf("shows %s among %d pending", want.FileID, len(files)), nil
	}
	return "", fmt.Errorf("the list of %d pending files does not show %s", len(files), want.FileID)
}

// content downloads f and compares its SHA-256 with the bytes sent (the
// client checks it against the list's and Repr-Digest too).
func (s *smoke) content(ctx context.Context, f *sentFile) (string, error) {
	st := f.staged
	h := sha256.New()
	n, err := s.c.Download(ctx, s.ws, client.File{FileID: st.FileID, Name: st.Name, Size: st.Size, SHA256: st.SHA256}, h)
	if err != nil {
		return "", err
	}
	if got := h.Sum(nil); n != f.f.Size || !bytes.Equal(got, f.sum[:]) {
		return "", fmt.Errorf("content %s: %d bytes with SHA-256 %x; sent %d bytes with %x", st.FileID, n, got, f.f.Size, f.sum)
	}
	return fmt.Sprintf("%s byte for byte (SHA-256 %s…)", humanize.Bytes(n), hex.EncodeToString(f.sum[:6])), nil
}

// uploadFirstPart presigns the file in parts and sends only its first
// part: an upload interrupted there.
func (s *smoke) uploadFirstPart(ctx context.Context) (string, error) {
	ups, err := s.c.Presign(ctx, s.ws, []client.UploadFile{s.parts.f})
	if err != nil {
		return "", err
	}
	p := ups[0]
	s.unfinished = append(s.unfinished, p.UploadID)
	s.partsUpload = p
	if p.Multipart == nil {
		return "", fmt.Errorf("presign planned one PUT for %s, a file above the multipart threshold: want parts", humanize.Bytes(s.parts.f.Size))
	}
	plan := *p.Multipart
	i := slices.IndexFunc(plan.Parts, func(pp client.PresignedPart) bool { return pp.PartNumber == 1 })
	if plan.PartCount < 2 || i < 0 {
		return "", fmt.Errorf("presign planned %d parts, %d to send: want at least 2, part 1 among them", plan.PartCount, len(plan.Parts))
	}
	plan.Parts = plan.Parts[i : i+1]
	first := p
	first.Multipart = &plan
	if err := s.c.PutPresigned(ctx, first, s.parts.f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s in %d parts of %s as upload %s: part 1 sent, then stopped", humanize.Bytes(s.parts.f.Size), plan.PartCount, humanize.Bytes(plan.PartBytes), p.UploadID), nil
}

// resume finishes the interrupted upload through the client's
// ResumeUpload, which must find part 1 in the bucket and send only the
// others.
func (s *smoke) resume(ctx context.Context) (string, error) {
	id := s.partsUpload.UploadID
	f := s.parts.f
	var progress []int64
	f.Progress = func(sent int64) { progress = append(progress, sent) }
	staged, err := s.c.ResumeUpload(ctx, s.ws, id, f)
	if err != nil {
		if errors.Is(err, client.ErrUploadGone) {
			return "", fmt.Errorf("the resume of upload %s, begun a moment ago, answered 404: does the API serve POST /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}? (%w)", id, err)
		}
		return "", err
	}
	s.unfinished = slices.DeleteFunc(s.unfinished, func(u uuid.UUID) bool { return u == id })
	s.unacked = append(s.unacked, staged.FileID)
	if err := s.parts.check(staged); err != nil {
		return "", err
	}
	s.parts.staged = staged
	// The client reports the parts the bucket holds as sent before it
	// sends any byte.
	part1 := min(s.partsUpload.Multipart.PartBytes, f.Size)
	if len(progress) == 0 || progress[0] != part1 {
		return "", fmt.Errorf("the resume did not start from part 1 held in the bucket (%s): its first progress was %v bytes", humanize.Bytes(part1), firstOr(progress))
	}
	rest := s.partsUpload.Multipart.PartCount - 1
	parts := "part"
	if rest > 1 {
		parts = "parts"
	}
	return fmt.Sprintf("the bucket held part 1; sent the other %d %s (%s) and committed as %s", rest, parts, humanize.Bytes(f.Size-part1), staged.FileID), nil
}

func firstOr(p []int64) any {
	if len(p) == 0 {
		return "none"
	}
	return p[0]
}

func (s *smoke) ack(ctx context.Context) (string, error) {
	n := 0
	for len(s.unacked) > 0 {
		id := s.unacked[0]
		if _, err := s.c.Ack(ctx, s.ws, id); err != nil {
			return "", err
		}
		s.unacked = s.unacked[1:]
		n++
	}
	if n == 1 {
		return "1 file acked", nil
	}
	return fmt.Sprintf("%d files acked", n), nil
}

func (s *smoke) listAfterAck(ctx context.Context) (string, error) {
	files, err := s.c.List(ctx, s.ws)
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if f.FileID == s.small.staged.FileID || (s.parts.staged.FileID != uuid.Nil && f.FileID == s.parts.staged.FileID) {
			return "", fmt.Errorf("the list still shows %s after its ack", f.FileID)
		}
	}
	return fmt.Sprintf("no longer shows them (%d pending)", len(files)), nil
}

// cleanup acks what the run staged and aborts what it began, after a
// failure; an upload whose abort finds it committed (its commit's answer
// was lost) is committed again, which answers its file, and that is
// acked. It tries every one, and reports what it could not clean.
func (s *smoke) cleanup(ctx context.Context) (string, error) {
	var done, left []string
	for _, id := range s.unfinished {
		err := s.c.AbortUpload(ctx, s.ws, id)
		switch {
		case err == nil:
			done = append(done, "aborted upload "+id.String())
		case client.IsNotFound(err):
			done = append(done, "upload "+id.String()+" was gone already")
		case client.ErrorCode(err) == wire.CodeUploadCommitted:
			staged, cerr := s.c.Commit(ctx, s.ws, []uuid.UUID{id})
			if cerr != nil {
				left = append(left, fmt.Sprintf("upload %s (%s)", id, explain(cerr)))
				continue
			}
			s.unacked = append(s.unacked, staged[0].FileID)
		default:
			left = append(left, fmt.Sprintf("upload %s (%s; it expires an hour after it began)", id, explain(err)))
		}
	}
	s.unfinished = nil
	for _, id := range s.unacked {
		if _, err := s.c.Ack(ctx, s.ws, id); err != nil && !client.IsNotFound(err) {
			left = append(left, fmt.Sprintf("file %s (%s; it stays pending until it expires)", id, explain(err)))
			continue
		}
		done = append(done, "acked "+id.String())
	}
	s.unacked = nil
	if len(left) > 0 {
		return "", fmt.Errorf("could not clean up %s", strings.Join(left, ", "))
	}
	if len(done) == 0 {
		return "nothing left to clean up", nil
	}
	return strings.Join(done, ", "), nil
}
