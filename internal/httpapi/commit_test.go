package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// presignPut presigns n files of sizes 100, 101, … for ws and PUTs their
// bytes, returning the upload IDs.
func presignPut(t *testing.T, srv *apptest.Server, ws uuid.UUID, n int) []string {
	t.Helper()
	var files []string
	for i := range n {
		files = append(files, fmt.Sprintf(`{"name":"f%d.bin","size":%d}`, i, 100+i))
	}
	res := post(t, presignURL(srv, ws.String()), srv.AdminToken, "application/json", []byte(`{"files":[`+strings.Join(files, ",")+`]}`))
	wantStatus(t, res, http.StatusOK)
	var pre presignAnswer
	decodeJSON(t, res.body, &pre)
	ids := make([]string, n)
	for i, u := range pre.Uploads {
		putObject(t, u.URL, u.Headers, make([]byte, 100+i))
		ids[i] = u.UploadID
	}
	return ids
}

func commitBody(ids ...string) []byte {
	var parts []string
	for _, id := range ids {
		parts = append(parts, `{"upload_id":"`+id+`"}`)
	}
	return []byte(`{"files":[` + strings.Join(parts, ",") + `]}`)
}

func fileIDs(t *testing.T, body []byte) []string {
	t.Helper()
	var staged stagedAnswer
	decodeJSON(t, body, &staged)
	var out []string
	for _, f := range staged.Files {
		out = append(out, f.FileID)
	}
	return out
}

// objectCount counts the files' objects of ws in the bucket.
func objectCount(t *testing.T, srv *apptest.Server, ws uuid.UUID) int {
	t.Helper()
	out, err := s3test.NewClient(srv.S3).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(srv.Bucket), Prefix: aws.String("objects/" + ws.String() + "/")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

// TestCommitRetry: a commit whose every upload this workspace committed
// before answers 200 with the files that commit stored, the same file_ids,
// and stores nothing new; a mix of committed and new uploads is 409
// upload_committed naming the first committed one, and stores nothing.
func TestCommitRetry(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	ws := uuid.New()
	ids := presignPut(t, srv, ws, 2)
	first := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(ids...))
	wantStatus(t, first, http.StatusOK)
	want := fileIDs(t, first.body)

	again := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(ids...))
	wantStatus(t, again, http.StatusOK)
	if strings.TrimSpace(string(again.body)) != strings.TrimSpace(string(first.body)) {
		t.Errorf("retry: got %s, want the first answer %s", again.body, first.body)
	}
	one := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(ids[1]))
	wantStatus(t, one, http.StatusOK)
	if got := fileIDs(t, one.body); !slices.Equal(got, want[1:]) {
		t.Errorf("retry of the second alone: got %v, want %v", got, want[1:])
	}
	if up, act := rowCounts(t, srv, ws); up != 2 || act != 2 || objectCount(t, srv, ws) != 2 {
		t.Errorf("after retries (rows, activity, objects): got (%d, %d, %d), want (2, 2, 2)", up, act, objectCount(t, srv, ws))
	}

	t.Run("OtherWorkspaceIsNoRetry", func(t *testing.T) {
		other := uuid.New()
		res := post(t, uploadsURL(srv, other.String()), srv.AdminToken, "application/json", commitBody(ids...))
		wantError(t, res, http.StatusConflict, "upload not received", map[string]any{"upload_id": ids[0]})
		wantNothingStored(t, srv, other)
	})
	// A mix is upload_committed naming the taken one, whichever comes
	// first (round 6: committed A, then A with a fresh B was 409
	// upload_not_received, which tells a client to PUT A again, forever);
	// nothing is stored, and the fresh one commits alone.
	for _, tc := range []struct {
		name       string
		takenFirst bool
	}{
		{"MixIs409NamingTheTakenOne", false},
		{"TakenFirstIs409NamingIt", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := presignPut(t, srv, ws, 1)[0]
			body := commitBody(fresh, ids[1])
			if tc.takenFirst {
				body = commitBody(ids[1], fresh)
			}
			up0, act0 := rowCounts(t, srv, ws)
			obj0 := objectCount(t, srv, ws)
			res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", body)
			wantError(t, res, http.StatusConflict, "upload already committed", map[string]any{"upload_id": ids[1]})
			if up, act := rowCounts(t, srv, ws); up != up0 || act != act0 || objectCount(t, srv, ws) != obj0 {
				t.Errorf("after the mix (rows, activity, objects): got (%d, %d, %d), want (%d, %d, %d)", up, act, objectCount(t, srv, ws), up0, act0, obj0)
			}
			wantStatus(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(fresh)), http.StatusOK)
		})
	}
}

// TestCommitRace: goroutines commit the same uploads at once, half of them
// all three, half only the last. Exactly one commit stores; every other
// answer is a 200 with the very same file_ids (a retry of the winner) or a
// 409 naming an upload that really was taken (never one that was fine),
// and nothing is stored twice.
func TestCommitRace(t *testing.T) {
	// Not parallel: REQUEST_TIMEOUT is 1 s, and the service must answer
	// within it where the test wants an answer.
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			ws := uuid.New()
			ids := presignPut(t, srv, ws, 3)
			sets := [][]string{ids, ids[2:]}
			const n = 8
			type answer struct {
				set int
				res result
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					set := i % 2
					answers[i] = answer{set, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(sets[set]...))}
				})
			}
			close(start)
			wg.Wait()

			byUpload := map[string]string{} // upload ID -> file ID, across all 200s
			for _, a := range answers {
				switch a.res.status {
				case http.StatusOK:
					for j, fid := range fileIDs(t, a.res.body) {
						up := sets[a.set][j]
						if prev, ok := byUpload[up]; ok && prev != fid {
							t.Errorf("upload %s answered as file %s and as %s", up, prev, fid)
						}
						byUpload[up] = fid
					}
				case http.StatusConflict:
					var body map[string]string
					if err := json.Unmarshal(a.res.body, &body); err != nil {
						t.Fatal(err)
					}
					named := body["upload_id"]
					if !slices.Contains(sets[a.set], named) {
						t.Errorf("409 names %s, not in its request %v", named, sets[a.set])
					}
					if sqlCount(t, srv, `SELECT count(*) FROM presigned_uploads WHERE upload_id = $1 AND file_id IS NOT NULL`, named) != 1 {
						t.Errorf("409 names %s, which no commit took", named)
					}
				default:
					t.Errorf("answer: %d %s, want 200 or 409", a.res.status, a.res.body)
				}
			}
			up, act := rowCounts(t, srv, ws)
			if up != len(byUpload) || act != len(byUpload) || objectCount(t, srv, ws) != len(byUpload) {
				t.Errorf("(rows, activity, objects): got (%d, %d, %d), want %d each (the files answered)", up, act, objectCount(t, srv, ws), len(byUpload))
			}
			if up != 1 && up != 3 {
				t.Errorf("rows: got %d, want one commit's worth (1 or 3)", up)
			}
		})
	}
}

// TestCommitDeadlineFollowsItsBytes: through the S3 protocol, with a
// bucket whose every copy answers 1.5 s late (s3test.PartProxy.SlowCopies)
// and REQUEST_TIMEOUT=1s, a commit of 48 MiB (1 s plus 12 s at
// pendinguploads.CopyRate) is staged, where the request's own deadline
// would cut it; a commit of 1 MiB (1.25 s) is cut, 503, nothing stored,
// and the same commit, once the bucket is quick again, stages it: a
// frozen bucket still ends a small commit early, and a cut one stays
// committable.
func TestCommitDeadlineFollowsItsBytes(t *testing.T) {
	// Not parallel: REQUEST_TIMEOUT is 1 s, and the service must answer
	// within it where the test wants an answer.
	proxy := s3test.StartPartProxy(t, s3test.MustStart(t).URL)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"S3_ENDPOINT": proxy.URL, "REQUEST_TIMEOUT": "1s", "MAX_FILE_BYTES": fmt.Sprint(64 * mib)}})
	ws := uuid.New()
	put := func(size int) (string, []byte) {
		t.Helper()
		res := post(t, presignURL(srv, ws.String()), srv.AdminToken, "application/json",
			[]byte(fmt.Sprintf(`{"files":[{"name":"f%d.bin","size":%d}]}`, size, size)))
		wantStatus(t, res, http.StatusOK)
		var pre presignAnswer
		decodeJSON(t, res.body, &pre)
		data := randomBytes(size)
		putObject(t, pre.Uploads[0].URL, pre.Uploads[0].Headers, data)
		return pre.Uploads[0].UploadID, data
	}
	big, bigData := put(48 * mib)
	small, _ := put(1 * mib)
	// Just over REQUEST_TIMEOUT, which alone would cut both commits: the
	// rest of the big one's 7 s is moto's own copy of 48 MiB, which a
	// loaded machine slows (at 3 s, moto had to copy faster than
	// 12 MiB/s; it did not at load 10).
	proxy.SlowCopies(1500*time.Millisecond, 0)

	res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(big))
	wantStatus(t, res, http.StatusOK)
	var staged stagedAnswer
	decodeJSON(t, res.body, &staged)
	if f := staged.Files[0]; f.Size != 48*mib || f.SHA256 != sha256Hex(bigData) {
		t.Errorf("staged: %+v, want 48 MiB of sha256 %s", f, sha256Hex(bigData))
	}

	res = post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(small))
	wantError(t, res, http.StatusServiceUnavailable, "storage unavailable, retry shortly", nil)
	if n := sqlCount(t, srv, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 1 {
		t.Fatalf("rows after the cut commit: %d, want 1 (the big file only)", n)
	}
	proxy.SlowCopies(0, 0)
	res = post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json", commitBody(small))
	wantStatus(t, res, http.StatusOK)
	if n := sqlCount(t, srv, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 2 {
		t.Errorf("rows: %d, want 2", n)
	}
}
