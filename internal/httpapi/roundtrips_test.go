package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestRoundTripsPerRequest holds what each request costs in Postgres
// round trips with a workspace token, in steady state (statements
// prepared, the token's last_used_at fresh): the token check rides in
// the same round trip as the request's work. List, content (a file up to
// 1 MiB, inline), ack, a multipart upload and a presign: one; a commit:
// two (the token and the promises before anything touches the bucket,
// then one transaction).
func TestRoundTripsPerRequest(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, CountRoundTrips: true})
	ws := uuid.New()
	wsID := ws.String()
	tok := srv.WorkspaceToken(t, ws)
	body, ctype := form(t, file("a.txt", "text/plain", "round trips"))

	var fileIDs []string
	upload := func(t *testing.T) {
		res := post(t, uploadsURL(srv, wsID), tok, ctype, body)
		wantStatus(t, res, http.StatusOK)
		var out stagedAnswer
		if err := json.Unmarshal(res.body, &out); err != nil {
			t.Fatal(err)
		}
		fileIDs = append(fileIDs, out.Files[0].FileID)
	}
	last := func() string { return fileIDs[len(fileIDs)-1] }
	presign := func(t *testing.T) presignAnswer {
		res := post(t, presignURL(srv, wsID), tok, "application/json", []byte(`{"files":[{"name":"p.bin","size":3}]}`))
		wantStatus(t, res, http.StatusOK)
		var out presignAnswer
		if err := json.Unmarshal(res.body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	calls := []struct {
		name string
		want int64
		do   func(t *testing.T)
	}{
		{"Upload", 1, upload},
		{"List", 1, func(t *testing.T) { wantStatus(t, get(t, listURL(srv, wsID), tok), http.StatusOK) }},
		{"Content", 1, func(t *testing.T) { wantStatus(t, get(t, contentURL(srv, wsID, last()), tok), http.StatusOK) }},
		{"Ack", 1, func(t *testing.T) { wantStatus(t, post(t, ackURL(srv, wsID, last()), tok, "", nil), http.StatusOK) }},
		{"Presign", 1, func(t *testing.T) { presign(t) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for range 2 { // warm: statements prepared, the token stamped
				c.do(t)
			}
			srv.RoundTrips.Reset()
			c.do(t)
			if got := srv.RoundTrips.Count(); got != c.want {
				t.Fatalf("round trips: got %d, want %d", got, c.want)
			}
		})
	}
	t.Run("Commit", func(t *testing.T) {
		commit := func(t *testing.T) {
			up := presign(t).Uploads[0]
			putObject(t, up.URL, up.Headers, []byte("abc"))
			srv.RoundTrips.Reset()
			wantStatus(t, post(t, uploadsURL(srv, wsID), tok, "application/json",
				[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, up.UploadID))), http.StatusOK)
		}
		commit(t)
		commit(t)
		if got := srv.RoundTrips.Count(); got != 2 {
			t.Fatalf("round trips: got %d, want 2", got)
		}
	})
}
