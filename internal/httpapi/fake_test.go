package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// fakeStore is an in-memory httpapi.Store for the tests of what is HTTP's
// own behaviour: status mapping, query and path parsing, multipart
// limits, CORS, error shapes, the content answer's headers. It is a fake,
// and proves nothing about storage:
//   - a bearer token is live when tokens maps it to its workspace; no
//     hashing at rest, no stamps, no org tokens, no SQL;
//   - files are kept in memory: no expiry, no quota, no sweep, no bucket
//     (a committed presigned upload is zeros of its declared size);
//   - fail[method], when set, is what that method returns once the token
//     passed: the store's errors, as the real store returns them.
//
// The suites against Postgres (apptest) prove the store's contract.
// Safe for concurrent use.
type fakeStore struct {
	fileCap int64
	bucket  bool

	mu      sync.Mutex
	tokens  map[string]uuid.UUID // token → its workspace
	fail    map[string]error     // method → its error
	calls   []fakeCall           // in order
	files   []*fakeFile
	uploads map[uuid.UUID]fakeUpload
}

// fakeCall is one call of a method, on a workspace (uuid.Nil: none named).
type fakeCall struct {
	method string
	ws     uuid.UUID
}

type fakeFile struct {
	rec      pendinguploads.Record
	content  []byte
	inBucket bool
}

type fakeUpload struct {
	ws   uuid.UUID
	decl pendinguploads.Declared
}

var _ httpapi.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{fileCap: maxFileBytes, tokens: map[string]uuid.UUID{}, fail: map[string]error{},
		uploads: map[uuid.UUID]fakeUpload{}}
}

// token returns a new live token of ws.
func (s *fakeStore) token(ws uuid.UUID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := "fake_" + uuid.NewString()
	s.tokens[hex.EncodeToString(auth.HashToken(tok))] = ws
	return tok
}

// failWith makes method return err from now on.
func (s *fakeStore) failWith(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = err
}

// callsFor returns the methods called on ws so far but Verify (a token's
// check, which changes nothing).
func (s *fakeStore) callsFor(ws uuid.UUID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if c.ws == ws && c.method != "Verify" {
			out = append(out, c.method)
		}
	}
	return out
}

// filesOf is how many files ws has.
func (s *fakeStore) filesOf(ws uuid.UUID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.files {
		if f.rec.WorkspaceID == ws {
			n++
		}
	}
	return n
}

// enter records a call of method acting for id on ws and checks id as
// the real store does (auth's check first; a trusted identity passes; a
// bearer passes on its own workspace, recording what its look-up found
// in the record auth's check hands over), then answers fail[method]. The
// caller holds no lock; enter returns holding it.
func (s *fakeStore) enter(ctx context.Context, method string, id *auth.Identity, ws *uuid.UUID) error {
	s.mu.Lock()
	call := fakeCall{method: method}
	if ws != nil {
		call.ws = *ws
	}
	s.calls = append(s.calls, call)
	cred, err := id.Check(ctx, ws)
	if err != nil {
		return err
	}
	if !cred.Trusted {
		own, ok := s.tokens[hex.EncodeToString(cred.TokenHash)]
		if !ok {
			return auth.ErrInvalid
		}
		if cred.Found != nil {
			*cred.Found = auth.Found{Kind: auth.Workspace, WorkspaceID: own, TokenPrefix: "fake"}
		}
		if ws != nil && *ws != own {
			return auth.ErrNotAllowed
		}
	}
	return s.fail[method]
}

func (s *fakeStore) Verify(ctx context.Context, id *auth.Identity, ws *uuid.UUID) error {
	defer s.mu.Unlock()
	return s.enter(ctx, "Verify", id, ws)
}

func (s *fakeStore) Stage(ctx context.Context, id *auth.Identity, ws uuid.UUID, files []pendinguploads.File) ([]pendinguploads.Record, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Stage", id, &ws); err != nil {
		return nil, err
	}
	recs := make([]pendinguploads.Record, len(files))
	for i, f := range files {
		sum := sha256.Sum256(f.Content)
		recs[i] = s.add(ws, f.Filename, f.Mimetype, sum[:], bytes.Clone(f.Content), false)
	}
	return recs, nil
}

// add stores a file; the caller holds the lock.
func (s *fakeStore) add(ws uuid.UUID, name, mimetype string, sum, content []byte, inBucket bool) pendinguploads.Record {
	now := time.Now().UTC().Truncate(time.Microsecond)
	rec := pendinguploads.Record{FileID: uuid.New(), WorkspaceID: ws, Filename: name, Mimetype: mimetype,
		SizeBytes: int64(len(content)), SHA256: sum, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	s.files = append(s.files, &fakeFile{rec: rec, content: content, inBucket: inBucket})
	return rec
}

func (s *fakeStore) Presign(ctx context.Context, id *auth.Identity, ws uuid.UUID, files []pendinguploads.Declared) ([]pendinguploads.PresignedPut, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Presign", id, &ws); err != nil {
		return nil, err
	}
	if !s.bucket {
		return nil, pendinguploads.ErrNoBucket
	}
	puts := make([]pendinguploads.PresignedPut, len(files))
	for i, f := range files {
		u := uuid.New()
		s.uploads[u] = fakeUpload{ws: ws, decl: f}
		puts[i] = s.put(u, f)
	}
	return puts, nil
}

// put is the presigned PUT (or part plan) of upload u; the caller holds
// the lock.
func (s *fakeStore) put(u uuid.UUID, f pendinguploads.Declared) pendinguploads.PresignedPut {
	p := pendinguploads.PresignedPut{UploadID: u, ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
	if !f.Multipart {
		p.URL, p.Headers = "https://bucket.invalid/"+u.String(), map[string]string{}
		return p
	}
	p.Multipart = &pendinguploads.Multipart{PartBytes: f.Size, PartCount: 1,
		Parts: []pendinguploads.PartPut{{Number: 1, Size: f.Size, URL: "https://bucket.invalid/" + u.String() + "/1"}}}
	return p
}

func (s *fakeStore) Commit(ctx context.Context, id *auth.Identity, ws uuid.UUID, ids []uuid.UUID) ([]pendinguploads.Record, bool, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Commit", id, &ws); err != nil {
		return nil, false, err
	}
	recs := make([]pendinguploads.Record, len(ids))
	for i, u := range ids {
		up, ok := s.uploads[u]
		if !ok || up.ws != ws {
			return nil, false, &pendinguploads.NotReceivedError{UploadID: u, Reason: "unknown to the fake"}
		}
		recs[i] = s.add(ws, up.decl.Filename, up.decl.Mimetype, up.decl.SHA256, make([]byte, up.decl.Size), true)
		delete(s.uploads, u)
	}
	return recs, false, nil
}

// upload is ws's presigned upload u; the caller holds the lock.
func (s *fakeStore) upload(ws, u uuid.UUID) (fakeUpload, error) {
	up, ok := s.uploads[u]
	if !ok || up.ws != ws {
		return fakeUpload{}, pendinguploads.ErrUploadNotFound
	}
	return up, nil
}

func (s *fakeStore) Resume(ctx context.Context, id *auth.Identity, ws, u uuid.UUID) (pendinguploads.PresignedPut, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Resume", id, &ws); err != nil {
		return pendinguploads.PresignedPut{}, err
	}
	up, err := s.upload(ws, u)
	if err != nil {
		return pendinguploads.PresignedPut{}, err
	}
	if !up.decl.Multipart {
		return pendinguploads.PresignedPut{}, pendinguploads.ErrNotMultipart
	}
	return s.put(u, up.decl), nil
}

func (s *fakeStore) Abort(ctx context.Context, id *auth.Identity, ws, u uuid.UUID) error {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Abort", id, &ws); err != nil {
		return err
	}
	if _, err := s.upload(ws, u); err != nil {
		return err
	}
	delete(s.uploads, u)
	return nil
}

func (s *fakeStore) List(ctx context.Context, id *auth.Identity, ws uuid.UUID, limit int, after *pendinguploads.Cursor) ([]pendinguploads.Record, *pendinguploads.Cursor, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "List", id, &ws); err != nil {
		return nil, nil, err
	}
	key := func(r pendinguploads.Record) pendinguploads.Cursor {
		return pendinguploads.Cursor{CreatedAt: r.CreatedAt, FileID: r.FileID}
	}
	order := func(a, b pendinguploads.Cursor) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), bytes.Compare(a.FileID[:], b.FileID[:]))
	}
	var recs []pendinguploads.Record
	for _, f := range s.files {
		if f.rec.WorkspaceID == ws && f.rec.AckedAt == nil && (after == nil || order(key(f.rec), *after) > 0) {
			recs = append(recs, f.rec)
		}
	}
	slices.SortFunc(recs, func(a, b pendinguploads.Record) int { return order(key(a), key(b)) })
	if len(recs) <= limit {
		return recs, nil, nil
	}
	next := key(recs[limit-1])
	return recs[:limit], &next, nil
}

// file is file fileID for ws: ErrNotFound when absent or another
// workspace's, as the store. The caller holds the lock.
func (s *fakeStore) file(ws, fileID uuid.UUID) (*fakeFile, error) {
	for _, f := range s.files {
		if f.rec.FileID == fileID && f.rec.WorkspaceID == ws {
			return f, nil
		}
	}
	return nil, pendinguploads.ErrNotFound
}

func (s *fakeStore) Fetch(ctx context.Context, id *auth.Identity, ws, fileID uuid.UUID, want pendinguploads.Want) (pendinguploads.Fetched, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Fetch", id, &ws); err != nil {
		return pendinguploads.Fetched{}, err
	}
	f, err := s.file(ws, fileID)
	if err != nil {
		return pendinguploads.Fetched{}, err
	}
	otherVersion := want.IfDigest != nil && !bytes.Equal(f.rec.SHA256, want.IfDigest)
	if otherVersion || f.rec.SizeBytes > want.From || (want.Redirect && f.inBucket) {
		now := time.Now().UTC()
		f.rec.FetchedAt = &now
	}
	// The fake's Fetched carries no check: its Open and SignGet read
	// what the fake holds.
	return pendinguploads.Fetched{Record: f.rec}, nil
}

// FetchLinked is Fetch for a link's holder: the route verified the link,
// so it is Fetch as the admin (as the store does).
func (s *fakeStore) FetchLinked(ctx context.Context, link downloadlink.Verified, want pendinguploads.Want) (pendinguploads.Fetched, error) {
	return s.Fetch(ctx, auth.AdminIdentity(), link.Workspace(), link.File(), want)
}

func (s *fakeStore) Open(ctx context.Context, r pendinguploads.Fetched, off, n int64) (pendinguploads.Body, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Open", auth.AdminIdentity(), &r.WorkspaceID); err != nil {
		return pendinguploads.Body{}, err
	}
	f, err := s.file(r.WorkspaceID, r.FileID)
	if err != nil {
		return pendinguploads.Body{}, err
	}
	return pendinguploads.Body{ReadCloser: io.NopCloser(bytes.NewReader(f.content[off : off+n])), InMemory: true}, nil
}

func (s *fakeStore) SignGet(ctx context.Context, r pendinguploads.Fetched, disposition, contentType string) (string, bool, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "SignGet", auth.AdminIdentity(), &r.WorkspaceID); err != nil {
		return "", false, err
	}
	f, err := s.file(r.WorkspaceID, r.FileID)
	if err != nil || !f.inBucket {
		return "", false, err
	}
	return "https://bucket.invalid/" + r.FileID.String() + "?response-content-type=" + contentType, true, nil
}

func (s *fakeStore) Ack(ctx context.Context, id *auth.Identity, ws, fileID uuid.UUID) (pendinguploads.AckResult, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "Ack", id, &ws); err != nil {
		return 0, err
	}
	f, err := s.file(ws, fileID)
	if err != nil {
		return 0, err
	}
	if f.rec.AckedAt != nil {
		return pendinguploads.AlreadyAcked, nil
	}
	now := time.Now().UTC()
	f.rec.AckedAt = &now
	return pendinguploads.Acked, nil
}

// ScanStates: the fake does not scan; every file of ws it holds is clean.
func (s *fakeStore) ScanStates(ctx context.Context, id *auth.Identity, ws uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]pendinguploads.FileScan, error) {
	defer s.mu.Unlock()
	if err := s.enter(ctx, "ScanStates", id, &ws); err != nil {
		return nil, err
	}
	out := map[uuid.UUID]pendinguploads.FileScan{}
	for _, id := range ids {
		if f, err := s.file(ws, id); err == nil {
			out[id] = pendinguploads.FileScan{FileID: f.rec.FileID, State: pendinguploads.ScanClean}
		}
	}
	return out, nil
}

func (s *fakeStore) HasBucket() bool { return s.bucket }
func (s *fakeStore) FileCap() int64  { return s.fileCap }

// fakeServer is the API over a fakeStore, served on loopback: the same
// handlers as production (API.Mux), no Postgres, no S3.
type fakeServer struct {
	URL        string
	AdminToken string
	Store      *fakeStore
	API        *httpapi.API
}

// fakeOptions set the fake server up: a bucket (presign offered), the
// request cap (default 4 MiB, the configuration's), the CORS origins.
type fakeOptions struct {
	Bucket          bool
	MaxRequestBytes int64
	Origins         []string
}

// newFakeServer starts the API over a new fakeStore for t.
func newFakeServer(t *testing.T, opts fakeOptions) *fakeServer {
	t.Helper()
	const admin = "fake-admin-token"
	authn, err := auth.NewAuthenticator(admin)
	if err != nil {
		t.Fatal(err)
	}
	store := newFakeStore()
	store.bucket = opts.Bucket
	api := httpapi.New(store, authn)
	api.MaxRequestBytes = cmp.Or(opts.MaxRequestBytes, 4<<20)
	api.MaxFileBytes = store.fileCap
	api.Logger = slog.New(slog.DiscardHandler)
	api.CORSAllowedOrigins = opts.Origins
	api.Limits = wire.Limits{PerFileBytes: maxFileBytes, PerRequestBytes: api.MaxRequestBytes,
		MaxAttachmentsPerMessage: limits.MaxFiles, Presign: opts.Bucket}
	hs := httptest.NewServer(api.Mux())
	t.Cleanup(hs.Close)
	return &fakeServer{URL: hs.URL, AdminToken: admin, Store: store, API: api}
}
