package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// scanEvents are GuardDuty's sample scan results (events/scanresult-*.json),
// one per result value of its list, and the state each leaves its file
// in under SCAN_UNDECIDED=hold.
var scanEvents = []struct {
	name  string
	state pendinguploads.ScanState
}{
	{"scanresult-no-threats-found", pendinguploads.ScanClean},
	{"scanresult-threats-found", pendinguploads.ScanBlocked},
	{"scanresult-unsupported", pendinguploads.ScanHeld},
	{"scanresult-access-denied", pendinguploads.ScanHeld},
	{"scanresult-failed", pendinguploads.ScanHeld},
}

// forObject returns a sample scan event naming bucket and key instead of
// the placeholders.
func forObject(t *testing.T, event []byte, bucket, key string) []byte {
	t.Helper()
	out := bytes.Replace(event, []byte(`"pendinguploads-content-sample"`), []byte(`"`+bucket+`"`), 1)
	out = bytes.Replace(out, []byte(`"objects/`+workspacePlaceholder+`/`+filePlaceholder+`"`), []byte(`"`+key+`"`), 1)
	if bytes.Equal(out, event) || !json.Valid(out) {
		t.Fatal("the sample event has no placeholder bucket and key")
	}
	return out
}

// TestScanResult drives the scanresult function's binary through the
// Runtime API with GuardDuty's sample event of every result value, each
// for a file of its own staged on a scanned deployment, all of them
// twice and in two orders, with exactly the S3 rights template.yaml
// grants the function (IAMProxy): clean is delivered (listed, its
// activity row written once), infected blocked with its object deleted,
// the undecidable held; repeats change nothing and fail no invocation; a
// result for another bucket, or for an object that is not a file, is
// ignored. EMF counts one of each decision. A second function under
// SCAN_UNDECIDED=deliver delivers a FAILED scan's file; a third, on its
// schedule, holds a file whose scan did not answer within SCAN_TIMEOUT.
func TestScanResult(t *testing.T) {
	t.Parallel()
	ep := s3test.MustStart(t)
	s3c, bucket := s3test.NewBucket(t, ep)
	pol, ok := templatePolicies(t, bucket, "")["Scanresult"]
	if !ok {
		t.Fatal("template.yaml: no function Scanresult")
	}
	proxy := s3test.StartIAMProxy(t, ep, map[string]s3test.Policy{principalKey("scanresult"): pol})
	dbURL := pgtest.MustURL(t)
	env := func(undecided string) []string {
		return append(proxy.Endpoint().Env(), "DATABASE_URL="+dbURL, "AWS_ACCESS_KEY_ID="+principalKey("scanresult"),
			"CONTENT_BUCKET="+bucket, "MALWARE_SCAN=guardduty", "SCAN_UNDECIDED="+undecided)
	}
	fn := start(t, "scanresult", env("hold")...)

	pool := openPool(t, dbURL)
	settings := apptest.StoreSettings()
	settings.Scanned = true
	store := pendinguploads.New(pool, s3blobs.NewFromClient(s3c, bucket), settings)
	ctx := context.Background()
	ws := uuid.MustParse(workspacePlaceholder)
	stage := func(name string) pendinguploads.Record {
		t.Helper()
		recs, err := store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("bytes of " + name), Filename: name + ".bin"}})
		if err != nil {
			t.Fatal(err)
		}
		return recs[0]
	}
	recs := make([]pendinguploads.Record, len(scanEvents))
	events := make([][]byte, len(scanEvents))
	for i, e := range scanEvents {
		recs[i] = stage(e.name)
		events[i] = forObject(t, readEvent(t, e.name), bucket, objectOf(recs[i]))
	}
	// Twice, in two orders; then results the function must ignore.
	order := []int{1, 4, 0, 2, 3, 3, 0, 2, 4, 1}
	for _, i := range order {
		invoke(t, fn, events[i])
	}
	ignored := [][]byte{
		forObject(t, readEvent(t, "scanresult-no-threats-found"), "another-bucket", objectOf(recs[1])),
		forObject(t, readEvent(t, "scanresult-no-threats-found"), bucket, "staging/"+workspacePlaceholder+"/"+uuid.NewString()),
		readEvent(t, "scanresult-no-threats-found"), // the placeholder bucket
	}
	for _, ev := range ignored {
		invoke(t, fn, ev)
	}

	ids := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		ids[i] = r.FileID
	}
	states, err := store.ScanStates(ctx, auth.AdminIdentity(), ws, ids)
	if err != nil {
		t.Fatal(err)
	}
	listed, _, err := store.List(ctx, auth.AdminIdentity(), ws, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range scanEvents {
		if got := states[recs[i].FileID].State; got != e.state {
			t.Errorf("%s: state %q, want %q", e.name, got, e.state)
		}
		isListed := false
		for _, l := range listed {
			isListed = isListed || l.FileID == recs[i].FileID
		}
		if isListed != (e.state == pendinguploads.ScanClean) {
			t.Errorf("%s: listed %v", e.name, isListed)
		}
		_, err := (&s3test.Objects{Client: s3c, Bucket: bucket}).Get(ctx, objectOf(recs[i]))
		if gone := err != nil; gone != (e.state == pendinguploads.ScanBlocked) {
			t.Errorf("%s: object gone %v (%v)", e.name, gone, err)
		}
	}
	var activity int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1`, ws).Scan(&activity); err != nil || activity != 1 {
		t.Errorf("activity rows: %d (%v), want 1: the clean file's, once", activity, err)
	}
	logs := fn.Logs()
	for metric, want := range map[string]float64{"pending_uploads_scan_clean": 1, "pending_uploads_scan_blocked": 1, "pending_uploads_scan_held": 3} {
		if got := emfTotal(t, logs, metric); got != want {
			t.Errorf("EMF %s: got %v, want %v", metric, got, want)
		}
	}
	if !strings.Contains(logs, `"msg":"malware blocked"`) || !strings.Contains(logs, recs[1].FileID.String()) {
		t.Errorf("no 'malware blocked' line naming the file in the logs")
	}

	// SCAN_UNDECIDED=deliver: a failed scan delivers.
	deliver := start(t, "scanresult", env("deliver")...)
	r := stage("failed-delivered")
	invoke(t, deliver, forObject(t, readEvent(t, "scanresult-failed"), bucket, objectOf(r)))
	if st, err := store.ScanStates(ctx, auth.AdminIdentity(), ws, []uuid.UUID{r.FileID}); err != nil || st[r.FileID].State != pendinguploads.ScanClean {
		t.Errorf("FAILED under deliver: got %+v (%v), want clean", st[r.FileID], err)
	}
	// The schedule (a Scheduled Event, as events/sweep.json): a scan
	// that has not answered within SCAN_TIMEOUT gets the policy, TIMEOUT.
	timed := start(t, "scanresult", append(env("hold"), "SCAN_TIMEOUT=1s")...)
	late := stage("never-answered")
	if _, err := pool.Exec(ctx, `UPDATE scanned_uploads SET created_at = now() - interval '1 minute' WHERE file_id = $1`, late.FileID); err != nil {
		t.Fatal(err)
	}
	invoke(t, timed, readEvent(t, "sweep"))
	invoke(t, timed, readEvent(t, "sweep")) // again: nothing more
	if st, err := store.ScanStates(ctx, auth.AdminIdentity(), ws, []uuid.UUID{late.FileID}); err != nil ||
		st[late.FileID].State != pendinguploads.ScanHeld || st[late.FileID].Result != "TIMEOUT" {
		t.Errorf("no answer within SCAN_TIMEOUT: got %+v (%v), want held, TIMEOUT", st[late.FileID], err)
	}
	if got := emfTotal(t, timed.Logs(), "pending_uploads_scan_held"); got != 1 {
		t.Errorf("EMF pending_uploads_scan_held after the schedule: %v, want 1", got)
	}
	for _, d := range proxy.Denied() {
		t.Errorf("denied as AWS would deny it: %s", d)
	}
}

// emfTotal sums a dimensionless metric's values over the log's EMF lines.
func emfTotal(t *testing.T, logs, metric string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) != nil || m["_aws"] == nil || m[metric] == nil {
			continue
		}
		var v float64
		if err := json.Unmarshal(m[metric], &v); err != nil {
			t.Errorf("EMF line %s: %v", line, err)
		}
		sum += v
	}
	return sum
}

// objectOf is the key of a scanned file's object: every one is in the
// bucket, under objects/<workspace>/<file>.
func objectOf(r pendinguploads.Record) string {
	return "objects/" + r.WorkspaceID.String() + "/" + r.FileID.String()
}
