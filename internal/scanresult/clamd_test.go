package scanresult_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/scanresult"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// eicar is the EICAR test file, built from two halves so that this
// source is not itself the test file.
var eicar = []byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$` + `EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`)

// hints records the files a Notifier was told of, and when.
type hints struct {
	mu sync.Mutex
	at map[uuid.UUID]time.Time
	n  map[uuid.UUID]int
}

func (h *hints) Notify(_ context.Context, _ uuid.UUID, ids []uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		h.at[id] = time.Now()
		h.n[id]++
	}
}

func (h *hints) count(id uuid.UUID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

func startClamd(t *testing.T) *scanresult.Clamd {
	t.Helper()
	c, err := scanresult.StartClamd(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("%v (make test installs clamav-daemon: scripts/ensure-tools.sh)", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestClamdScans: the repository's signature database, loaded by clamd,
// finds the EICAR test file and the custom signature's marker, in a
// stream cut into chunks anywhere, and nothing in a clean file.
func TestClamdScans(t *testing.T) {
	c := startClamd(t)
	ctx := context.Background()
	big := strings.Repeat("a", 200<<10) // the marker across a chunk boundary
	for _, tc := range []struct {
		name, data, want string
	}{
		{"EICAR", string(eicar), "Eicar-Test-Signature"},
		{"Marker", big[:65530] + scanresult.CustomMarker + big, "PendingUploads.Test.Marker"},
		{"Clean", "hello, world\n" + big, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanresult.ScanStream(ctx, c.Addr, strings.NewReader(tc.data))
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestClamdEndToEnd: on a scanned store, the stand-in scans each
// committed object with clamd and hands GuardDuty's event to the same
// Handler the function runs: the EICAR file and the custom signature's
// file are blocked (never listed, fetched, logged in activity_logs or
// hinted; their objects deleted; the sender reads blocked), and the clean
// file is delivered, its activity row and hint only after the verdict,
// its object tagged GuardDutyMalwareScanStatus=NO_THREATS_FOUND.
// It logs the latency the scan adds, from the commit to the hint.
func TestClamdEndToEnd(t *testing.T) {
	c := startClamd(t)
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	pool := pgtest.MustOpen(t)
	blobs := s3blobs.NewFromClient(client, bucket)
	settings := apptest.StoreSettings()
	settings.Scanned = true
	store := pendinguploads.New(pool, blobs, settings)
	h := &hints{at: map[uuid.UUID]time.Time{}, n: map[uuid.UUID]int{}}
	store.Notifier = h
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ws := uuid.New()
	files := []pendinguploads.File{
		{Content: eicar, Filename: "eicar.com"},
		{Content: []byte("a report\n" + scanresult.CustomMarker + "\nthe end\n"), Filename: "report.pdf"},
		{Content: []byte("hello, world\n"), Filename: "hello.txt", Mimetype: "text/plain"},
	}
	staged := time.Now()
	recs, err := store.Stage(ctx, auth.AdminIdentity(), ws, files)
	if err != nil {
		t.Fatal(err)
	}
	if n := activity(t, pool, ws); n != 0 {
		t.Fatalf("activity rows before any verdict: %d", n)
	}

	handler := &scanresult.Handler{Store: store, Bucket: bucket, Policy: scanresult.PolicyHold, Timeout: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New(io.Discard, metrics.Namespace)}
	standin := &scanresult.Standin{Store: store, Bucket: blobs, Tagger: blobs, Handler: handler, Addr: c.Addr, Every: 20 * time.Millisecond, Log: handler.Log}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { standin.Run(sctx); close(done) }()
	defer func() { stop(); <-done }()

	ids := []uuid.UUID{recs[0].FileID, recs[1].FileID, recs[2].FileID}
	var states map[uuid.UUID]pendinguploads.FileScan
	for {
		states, err = store.ScanStates(ctx, auth.AdminIdentity(), ws, ids)
		if err != nil {
			t.Fatal(err)
		}
		decided := 0
		for _, s := range states {
			if s.State != pendinguploads.ScanPending {
				decided++
			}
		}
		if decided == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no verdict for every file: %+v", states)
		case <-time.After(20 * time.Millisecond):
		}
	}
	want := []pendinguploads.ScanState{pendinguploads.ScanBlocked, pendinguploads.ScanBlocked, pendinguploads.ScanClean}
	listed, _, err := store.List(ctx, auth.AdminIdentity(), ws, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if got := states[r.FileID].State; got != want[i] {
			t.Errorf("%s: state %q, want %q", r.Filename, got, want[i])
		}
		isListed := false
		for _, l := range listed {
			isListed = isListed || l.FileID == r.FileID
		}
		_, ferr := store.Fetch(ctx, auth.AdminIdentity(), ws, r.FileID, pendinguploads.Want{})
		delivered := want[i] == pendinguploads.ScanClean
		if isListed != delivered || (ferr == nil) != delivered || (h.count(r.FileID) == 1) != delivered {
			t.Errorf("%s: listed %v, fetch %v, hints %d; want delivered %v", r.Filename, isListed, ferr, h.count(r.FileID), delivered)
		}
		if ferr != nil && !errors.Is(ferr, pendinguploads.ErrNotFound) {
			t.Errorf("%s: fetch: %v", r.Filename, ferr)
		}
		_, oerr := blobs.Open(ctx, "objects/"+ws.String()+"/"+r.FileID.String(), 0, 1)
		if gone := errors.Is(oerr, pendinguploads.ErrBlobNotFound); gone == delivered {
			t.Errorf("%s: object gone %v, want %v", r.Filename, gone, !delivered)
		}
	}
	if n := activity(t, pool, ws); n != 1 {
		t.Errorf("activity rows: %d, want 1 (the clean file's)", n)
	}
	// The delivered file's object carries GuardDuty's tag, as GuardDuty sets it.
	tags, err := client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket),
		Key: aws.String("objects/" + ws.String() + "/" + recs[2].FileID.String())})
	if err != nil || len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != scanresult.ScanStatusTag ||
		aws.ToString(tags.TagSet[0].Value) != scanresult.NoThreatsFound {
		t.Errorf("the clean object's tags: %+v, %v; want %s=%s", tags, err, scanresult.ScanStatusTag, scanresult.NoThreatsFound)
	}
	reasons := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT filename, coalesce(reason, '') FROM scanned_uploads WHERE workspace_id = $1`, ws)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var f, r string
		rows.Scan(&f, &r)
		reasons[f] = r
	}
	if reasons["eicar.com"] != "Eicar-Test-Signature" || reasons["report.pdf"] != "PendingUploads.Test.Marker" {
		t.Errorf("the records' reasons: %v", reasons)
	}
	h.mu.Lock()
	t.Logf("added latency to delivery (clamd stand-in, polling every 20ms): %s from the stage's return to the hint", h.at[recs[2].FileID].Sub(staged))
	h.mu.Unlock()
}

func activity(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM activity_logs WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHeldFileKeepsWhyItsScanDidNotDecide: a result that could not decide
// keeps its statusReasons in the held file's record (HeldScans, which
// pendingctl scans prints), and a THREATS_FOUND result its threats'
// names, for the operator who decides the file. The reason value here
// is illustrative: the handler keeps whatever GuardDuty names.
func TestHeldFileKeepsWhyItsScanDidNotDecide(t *testing.T) {
	ctx := context.Background()
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	settings := apptest.StoreSettings()
	settings.Scanned = true
	store := pendinguploads.New(pgtest.MustOpen(t), s3blobs.NewFromClient(client, bucket), settings)
	h := &scanresult.Handler{Store: store, Bucket: bucket, Policy: scanresult.PolicyHold,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New(io.Discard, "test")}
	ws := uuid.New()
	recs, err := store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("locked"), Filename: "locked.zip"}})
	if err != nil {
		t.Fatal(err)
	}
	var d scanresult.Detail
	d.SchemaVersion, d.ScanStatus, d.ResourceType = "1.0", "SKIPPED", "S3_OBJECT"
	d.S3ObjectDetails.BucketName = bucket
	d.S3ObjectDetails.ObjectKey = "objects/" + ws.String() + "/" + recs[0].FileID.String()
	d.ScanResultDetails.ScanResultStatus = scanresult.Unsupported
	d.ScanResultDetails.StatusReasons = []string{"PASSWORD_PROTECTED"}
	if err := h.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	held, err := store.HeldScans(ctx, 10)
	if err != nil || len(held) != 1 || held[0].Result != scanresult.Unsupported || held[0].Reason != "PASSWORD_PROTECTED" {
		t.Fatalf("held: got %+v, %v; want UNSUPPORTED, PASSWORD_PROTECTED", held, err)
	}
}
