package pendinguploads_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestIdentitiesRefusedBeforeIO: identities that no check settled are
// refused before the store sends anything (auth.Identity.Check; since
// Identity's fields are unexported, the zero Identity is all another
// package can assemble, and admin or session identities "by hand" no
// longer compile), and the file they aim at stays
// unlisted by them and unacked. (Before access: a hand-built org identity
// without a token hash listed and acked another workspace's file, since a
// NULL hash meant "trusted" in the guard's SQL; a workspace identity for
// another workspace got ErrNotAllowed only after its ack had committed.)
func TestIdentitiesRefusedBeforeIO(t *testing.T) {
	ctx := context.Background()
	s, pool, tr := openTraced(t)
	victim := uuid.New()
	mine := uuid.New()
	// A live workspace token of mine: its hash is real, its workspace is
	// not the victim's.
	tok, _, err := admin.CreateToken(ctx, pool, mine)
	if err != nil {
		t.Fatal(err)
	}
	found := auth.TokenIdentity(tok).Found(auth.Workspace, mine, "p")
	for _, c := range []struct {
		name string
		id   *auth.Identity
		want error
	}{
		{"OrgWithoutHash", auth.AdminIdentity().Found(auth.Org, uuid.Nil, "p"), auth.ErrInvalid},
		{"WorkspaceWithoutHash", auth.AdminIdentity().Found(auth.Workspace, victim, "p"), auth.ErrInvalid},
		{"WorkspaceOfAnother", found, auth.ErrNotAllowed},
		{"ZeroKind", &auth.Identity{}, auth.ErrInvalid},
		{"Nil", nil, auth.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := mustStage(t, s, victim, c.name+".txt")
			before := tr.trips.Load()
			recs, _, lerr := s.List(ctx, c.id, victim, 10, nil)
			_, aerr := s.Ack(ctx, c.id, victim, rec.FileID)
			_, ferr := s.Fetch(ctx, c.id, victim, rec.FileID, pendinguploads.Want{})
			for op, err := range map[string]error{"list": lerr, "ack": aerr, "fetch": ferr} {
				if !errors.Is(err, c.want) {
					t.Errorf("%s: got %v, want %v", op, err, c.want)
				}
			}
			if len(recs) != 0 {
				t.Errorf("list: got %d files, want none", len(recs))
			}
			if n := tr.trips.Load() - before; n != 0 {
				t.Errorf("%d round trips sent for a refused identity, want none", n)
			}
			if at := ackedAtOrNil(t, pool, rec.FileID); at {
				t.Error("the victim's file was acked")
			}
		})
	}
}

// ackedAtOrNil reports whether fileID is acked.
func ackedAtOrNil(t *testing.T, pool *pgxpool.Pool, fileID uuid.UUID) bool {
	t.Helper()
	var acked bool
	if err := pool.QueryRow(context.Background(), `SELECT acked_at IS NOT NULL FROM pending_uploads WHERE file_id = $1`, fileID).Scan(&acked); err != nil {
		t.Fatal(err)
	}
	return acked
}

// TestOpenNeedsFetch: Open and SignGet read nothing of a file that Fetch
// did not find for a checked caller. Store.Open used to take a Record,
// and a Record assembled by hand read any inline row's bytes; a Record
// cannot be passed any more (that probe no longer compiles), and a
// Fetched assembled by hand, or one turned to another workspace, is
// refused before any I/O.
func TestOpenNeedsFetch(t *testing.T) {
	ctx := context.Background()
	s, pool, tr := openTraced(t)
	ws, other := uuid.New(), uuid.New()
	// Larger than ChunkBytes: Open would read it from Postgres.
	big := make([]byte, pendinguploads.ChunkBytes+1)
	victim, err := stageOne(ctx, s, other, big, "secret.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	mine := mustStage(t, s, ws, "mine.txt")
	fetched, err := s.Fetch(ctx, auth.AdminIdentity(), ws, mine.FileID, pendinguploads.Want{})
	if err != nil {
		t.Fatal(err)
	}
	turned := fetched
	turned.Record = victim
	for name, f := range map[string]pendinguploads.Fetched{
		"ByHand":  {Record: victim},
		"Zero":    {},
		"Turned":  turned,
		"Renamed": func() pendinguploads.Fetched { f := fetched; f.WorkspaceID = other; return f }(),
	} {
		t.Run(name, func(t *testing.T) {
			before := tr.trips.Load()
			if body, err := s.Open(ctx, f, 0, f.SizeBytes); !errors.Is(err, pendinguploads.ErrNotFetched) {
				if err == nil {
					body.Close()
				}
				t.Errorf("open: got %v, want ErrNotFetched", err)
			}
			if _, _, err := s.SignGet(ctx, f, "attachment", "text/plain"); !errors.Is(err, pendinguploads.ErrNotFetched) {
				t.Errorf("sign get: got %v, want ErrNotFetched", err)
			}
			if n := tr.trips.Load() - before; n != 0 {
				t.Errorf("%d round trips sent, want none", n)
			}
		})
	}
	t.Run("Fetched", func(t *testing.T) {
		body, err := s.Open(ctx, fetched, 0, fetched.SizeBytes)
		if err != nil {
			t.Fatalf("open of a fetched file: %v", err)
		}
		body.Close()
	})
	_ = pool
}

// TestFetchLinkedNeedsACheckedLink: a download link reaches the store
// only as the downloadlink.Verified that Check made; a zero one names no
// file and is refused before any I/O.
func TestFetchLinkedNeedsACheckedLink(t *testing.T) {
	ctx := context.Background()
	s, _, tr := openTraced(t)
	before := tr.trips.Load()
	if _, err := s.FetchLinked(ctx, downloadlink.Verified{}, pendinguploads.Want{}); !errors.Is(err, pendinguploads.ErrNotFound) {
		t.Errorf("fetch linked, zero link: got %v, want ErrNotFound", err)
	}
	if n := tr.trips.Load() - before; n != 0 {
		t.Errorf("%d round trips sent, want none", n)
	}
}

// TestFetchLinkedOpensItsFileAlone: what a download link fetched opens
// the link's one file, whatever is done to the Fetched's Record: turned
// to another file of the same workspace (its id alone, or its whole
// Record), it is refused before any I/O. (Before: FetchLinked fetched as
// the admin, and Open read by the Record's FileID, so a one-file link
// turned into every file of its workspace.)
func TestFetchLinkedOpensItsFileAlone(t *testing.T) {
	ctx := context.Background()
	s, _, tr := openTraced(t)
	ws := uuid.New()
	// Larger than ChunkBytes: Open reads them from Postgres by id.
	linked := make([]byte, pendinguploads.ChunkBytes+1)
	other := make([]byte, pendinguploads.ChunkBytes+1)
	other[0] = 1
	a, err := stageOne(ctx, s, ws, linked, "linked.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := stageOne(ctx, s, ws, other, "other.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := downloadlink.New("0123456789abcdef0123456789abcdef-test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	link, err := signer.Sign(ctx, ws, a.FileID)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(link.Query)
	v, err := signer.Check(ctx, ws, a.FileID, q.Get(downloadlink.ParamExpires), q.Get(downloadlink.ParamKey), q.Get(downloadlink.ParamSignature))
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := s.FetchLinked(ctx, v, pendinguploads.Want{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.Open(ctx, fetched, 0, fetched.SizeBytes)
	if err != nil {
		t.Fatalf("open of the linked file: %v", err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(got, linked) {
		t.Fatalf("the linked file: got %d bytes (%v), want its own", len(got), err)
	}
	for name, f := range map[string]pendinguploads.Fetched{
		"FileIDTurned": func() pendinguploads.Fetched { f := fetched; f.FileID = b.FileID; return f }(),
		"RecordTurned": func() pendinguploads.Fetched { f := fetched; f.Record = b; return f }(),
	} {
		t.Run(name, func(t *testing.T) {
			before := tr.trips.Load()
			body, err := s.Open(ctx, f, 0, f.SizeBytes)
			if err == nil {
				got, _ := io.ReadAll(body)
				body.Close()
				t.Fatalf("open: read %d bytes (the other file's: %v), want ErrNotFetched", len(got), bytes.Equal(got, other))
			}
			if !errors.Is(err, pendinguploads.ErrNotFetched) {
				t.Errorf("open: got %v, want ErrNotFetched", err)
			}
			if n := tr.trips.Load() - before; n != 0 {
				t.Errorf("%d round trips sent, want none", n)
			}
		})
	}
}
