package pendinguploads_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// openBucket returns a store over a fresh database and a fresh bucket.
func openBucket(t testing.TB) *pendinguploads.Store {
	t.Helper()
	client, bucket := s3test.NewBucket(t, s3test.MustStart(t))
	b := s3blobs.NewFromClient(client, bucket)
	b.MaxSize = limits.MaxFileBytes
	pool := pgtest.MustOpen(t)
	s := pendinguploads.New(pool, b, apptest.StoreSettings())
	s.MaxFileBytes = limits.MaxFileBytes
	return s
}

// putPresigned sends data with the presigned PUT, as a client does.
func putPresigned(t testing.TB, p pendinguploads.PresignedPut, data []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, p.URL, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: status %d", res.StatusCode)
	}
}

// TestPresignAndCommit: the presigned workflow through the store's own
// surface: the commit places and measures the object, a retry replays
// the same files and stores nothing, and an upload whose object is
// missing, or holds another size than declared, is refused by name with
// nothing stored.
func TestPresignAndCommit(t *testing.T) {
	s := openBucket(t)
	ctx := context.Background()
	ws := uuid.New()
	data := bytes.Repeat([]byte("presigned "), 40_000)
	puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{
		{Filename: "a.bin", Size: int64(len(data))},
		{Filename: "short.bin", Mimetype: "text/plain", Size: 10},
		{Filename: "never.bin", Size: 5},
	})
	if err != nil || len(puts) != 3 {
		t.Fatalf("presign: %v (%d)", err, len(puts))
	}
	putPresigned(t, puts[0], data)
	putPresigned(t, puts[1], []byte("not ten bytes"))

	recs, replayed, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
	if err != nil || replayed || len(recs) != 1 {
		t.Fatalf("commit: %v, replayed %v, %d files", err, replayed, len(recs))
	}
	sum := sha256.Sum256(data)
	if rec := recs[0]; !rec.InBucket() || rec.SizeBytes != int64(len(data)) || !bytes.Equal(rec.SHA256, sum[:]) || rec.Filename != "a.bin" {
		t.Fatalf("committed file: got %+v", rec)
	}
	again, replayed, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
	if err != nil || !replayed || len(again) != 1 || again[0].FileID != recs[0].FileID {
		t.Fatalf("retried commit: %v, replayed %v, %+v", err, replayed, again)
	}

	for _, tc := range []struct {
		name string
		ids  []uuid.UUID
		want uuid.UUID
	}{
		{"WrongSize", []uuid.UUID{puts[1].UploadID}, puts[1].UploadID},
		{"NoObject", []uuid.UUID{puts[2].UploadID}, puts[2].UploadID},
		{"Unknown", []uuid.UUID{uuid.New()}, uuid.Nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, tc.ids)
			nr, ok := errors.AsType[*pendinguploads.NotReceivedError](err)
			if !ok || (tc.want != uuid.Nil && nr.UploadID != tc.want) {
				t.Fatalf("got %v, want not received naming %s", err, tc.want)
			}
			list, _, err := s.List(ctx, auth.AdminIdentity(), ws, 10, nil)
			if err != nil || len(list) != 1 {
				t.Fatalf("files after the refusal: %d (%v), want the first commit's 1", len(list), err)
			}
		})
	}
	// A committed upload beside one none took, in either order: the
	// committed one named, as committed (ErrUploadCommitted), not as not
	// received (which would send a client to PUT it again).
	for _, tc := range []struct {
		name string
		ids  []uuid.UUID
	}{
		{"CommittedBesideNew", []uuid.UUID{puts[2].UploadID, puts[0].UploadID}},
		{"CommittedFirst", []uuid.UUID{puts[0].UploadID, puts[2].UploadID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, tc.ids)
			ce, ok := errors.AsType[*pendinguploads.CommittedError](err)
			if !ok || ce.UploadID != puts[0].UploadID || !errors.Is(err, pendinguploads.ErrUploadCommitted) {
				t.Fatalf("got %v, want already committed naming %s", err, puts[0].UploadID)
			}
			list, _, err := s.List(ctx, auth.AdminIdentity(), ws, 10, nil)
			if err != nil || len(list) != 1 {
				t.Fatalf("files after the refusal: %d (%v), want the first commit's 1", len(list), err)
			}
		})
	}
}

// TestCommitWithDeclaredDigest: a declared SHA-256 is signed into the PUT
// (its header is one the client must send), and the commit takes the
// digest from the bucket's checksum: the declared bytes commit; other
// bytes of the same size are refused by name, nothing stored. (Real S3
// refuses such a PUT already; moto takes it, so the commit's check is
// what this proves.)
func TestCommitWithDeclaredDigest(t *testing.T) {
	s := openBucket(t)
	ctx := context.Background()
	ws := uuid.New()
	data, other := bytes.Repeat([]byte("declared "), 30_000), bytes.Repeat([]byte("Declared "), 30_000)
	sum := sha256.Sum256(data)
	puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{
		{Filename: "good.bin", Size: int64(len(data)), SHA256: sum[:]},
		{Filename: "swapped.bin", Size: int64(len(data)), SHA256: sum[:]},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := puts[0].Headers["x-amz-checksum-sha256"]; got != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Fatalf("PUT headers: x-amz-checksum-sha256 %q, want the declared digest", got)
	}
	putPresigned(t, puts[0], data)
	putPresigned(t, puts[1], other)

	recs, _, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
	if err != nil || !bytes.Equal(recs[0].SHA256, sum[:]) {
		t.Fatalf("commit of the declared bytes: %v", err)
	}
	_, _, err = s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[1].UploadID})
	if nr, ok := errors.AsType[*pendinguploads.NotReceivedError](err); !ok || nr.UploadID != puts[1].UploadID {
		t.Fatalf("commit of other bytes: got %v, want not received", err)
	}
	if list, _, _ := s.List(ctx, auth.AdminIdentity(), ws, 10, nil); len(list) != 1 {
		t.Fatalf("files: got %d, want 1", len(list))
	}
}
