package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// listPage is list's body.
type listPage struct {
	Uploads []struct {
		FileID    string     `json:"file_id"`
		URI       string     `json:"uri"`
		Name      string     `json:"name"`
		MimeType  string     `json:"mimeType"`
		Size      int64      `json:"size"`
		SHA256    *string    `json:"sha256"`
		CreatedAt time.Time  `json:"created_at"`
		ExpiresAt time.Time  `json:"expires_at"`
		FetchedAt *time.Time `json:"fetched_at"`
	} `json:"uploads"`
	NextCursor *string `json:"next_cursor"`
}

func (p listPage) ids() []string {
	out := make([]string, len(p.Uploads))
	for i, u := range p.Uploads {
		out[i] = u.FileID
	}
	return out
}

// listQuery lists ws with the raw query q and fails unless 200.
func listQuery(t *testing.T, srv *apptest.Server, ws uuid.UUID, token, q string) listPage {
	t.Helper()
	u := listURL(srv, ws.String())
	if q != "" {
		u += "?" + q
	}
	res := get(t, u, token)
	wantStatus(t, res, http.StatusOK)
	if got := res.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
	var p listPage
	decodeJSON(t, res.body, &p)
	if p.NextCursor != nil && *p.NextCursor == "" {
		t.Errorf("next_cursor: got \"\", want absent or a cursor")
	}
	return p
}

// walk pages through ws with limit and returns every file ID in order.
func walk(t *testing.T, srv *apptest.Server, ws uuid.UUID, limit int) (ids []string, pages int) {
	t.Helper()
	q := fmt.Sprintf("limit=%d", limit)
	for {
		p := listQuery(t, srv, ws, srv.AdminToken, q)
		pages++
		if len(p.Uploads) > limit {
			t.Fatalf("page %d: got %d uploads, want at most %d", pages, len(p.Uploads), limit)
		}
		ids = append(ids, p.ids()...)
		if p.NextCursor == nil {
			return ids, pages
		}
		if pages > 100 {
			t.Fatal("the cursor never ends")
		}
		q = fmt.Sprintf("limit=%d&after=%s", limit, url.QueryEscape(*p.NextCursor))
	}
}

// dbOrder returns ws's visible file IDs in (created_at, file_id) order.
func dbOrder(t *testing.T, srv *apptest.Server, ws uuid.UUID) []string {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(), `SELECT file_id::text FROM pending_uploads
		WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() ORDER BY created_at, file_id`, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestList(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})

	t.Run("EmptyIsEmptyArray", func(t *testing.T) {
		ws := uuid.New()
		res := get(t, listURL(srv, ws.String()), srv.WorkspaceToken(t, ws))
		wantStatus(t, res, http.StatusOK)
		if got := strings.TrimSpace(string(res.body)); got != `{"uploads":[]}` {
			t.Errorf("body: got %s, want {\"uploads\":[]}", got)
		}
		if got := res.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type: got %q, want application/json", got)
		}
	})

	t.Run("FieldsExactly", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		f := stage(t, srv, ws, "a b.txt", "text/plain; charset=utf-8", "hello")
		res := get(t, listURL(srv, ws.String()), tok)
		wantStatus(t, res, http.StatusOK)
		top := jsonObject(t, res.body)
		if got := keys(top); !slices.Equal(got, []string{"uploads"}) {
			t.Errorf("body fields: got %v, want [uploads]", got)
		}
		ups, _ := top["uploads"].([]any)
		if len(ups) != 1 {
			t.Fatalf("uploads: got %d, want 1", len(ups))
		}
		u, _ := ups[0].(map[string]any)
		wantKeys := []string{"created_at", "expires_at", "fetched_at", "file_id", "mimeType", "name", "sha256", "size", "uri"}
		if got := keys(u); !slices.Equal(got, wantKeys) {
			t.Errorf("upload fields: got %v, want %v", got, wantKeys)
		}
		want := map[string]any{
			"file_id": f.FileID, "uri": "platform-pending:" + ws.String() + "/" + f.FileID, "name": "a_b.txt",
			"mimeType": "text/plain", "size": 5, "sha256": sha256Hex([]byte("hello")),
		}
		for k, v := range want {
			if got := fmt.Sprint(u[k]); got != fmt.Sprint(v) {
				t.Errorf("%s: got %v, want %v", k, got, v)
			}
		}
		if u["fetched_at"] != nil {
			t.Errorf("fetched_at before a fetch: got %v, want null", u["fetched_at"])
		}
		created, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(u["created_at"]))
		expires, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(u["expires_at"]))
		if err1 != nil || err2 != nil {
			t.Fatalf("created_at, expires_at: got %v, %v, want RFC 3339", u["created_at"], u["expires_at"])
		}
		if d := expires.Sub(created); d != 24*time.Hour {
			t.Errorf("expires_at - created_at: got %v, want 24h", d)
		}
		if d := time.Since(created); d < -time.Minute || d > time.Minute {
			t.Errorf("created_at: got %v, want about now", created)
		}

		wantStatus(t, get(t, contentURL(srv, ws.String(), f.FileID), tok), http.StatusOK)
		p := listQuery(t, srv, ws, tok, "")
		if len(p.Uploads) != 1 || p.Uploads[0].FetchedAt == nil {
			t.Fatalf("fetched_at after a fetch: got %+v, want set", p.Uploads)
		}
		if d := time.Since(*p.Uploads[0].FetchedAt); d < -time.Minute || d > time.Minute {
			t.Errorf("fetched_at: got %v, want about now", p.Uploads[0].FetchedAt)
		}
	})

	t.Run("OldestFirst", func(t *testing.T) {
		ws := uuid.New()
		a := stage(t, srv, ws, "a", "", "a")
		b := stage(t, srv, ws, "b", "", "b")
		c := stage(t, srv, ws, "c", "", "c")
		// Order by created_at, whatever the insertion order or the IDs.
		sqlExec(t, srv, `UPDATE pending_uploads SET created_at = now() - interval '3 minutes' WHERE file_id = $1`, c.FileID)
		sqlExec(t, srv, `UPDATE pending_uploads SET created_at = now() - interval '2 minutes' WHERE file_id = $1`, a.FileID)
		sqlExec(t, srv, `UPDATE pending_uploads SET created_at = now() - interval '1 minutes' WHERE file_id = $1`, b.FileID)
		p := listQuery(t, srv, ws, srv.AdminToken, "")
		if got, want := p.ids(), []string{c.FileID, a.FileID, b.FileID}; !slices.Equal(got, want) {
			t.Errorf("order: got %v, want %v", got, want)
		}
		if p.NextCursor != nil {
			t.Errorf("next_cursor on the only page: got %q, want absent", *p.NextCursor)
		}
	})

	t.Run("HiddenRowsAbsent", func(t *testing.T) {
		ws, other := uuid.New(), uuid.New()
		live := stage(t, srv, ws, "live", "", "l")
		acked := stage(t, srv, ws, "acked", "", "a")
		expired := stage(t, srv, ws, "expired", "", "e")
		stage(t, srv, other, "others", "", "o")
		wantStatus(t, post(t, ackURL(srv, ws.String(), acked.FileID), srv.AdminToken, "", nil), http.StatusOK)
		expire(t, srv, expired.FileID)
		p := listQuery(t, srv, ws, srv.WorkspaceToken(t, ws), "")
		if got, want := p.ids(), []string{live.FileID}; !slices.Equal(got, want) {
			t.Errorf("uploads: got %v, want %v", got, want)
		}
	})

	// One workspace of 51 files in one request (so they share created_at)
	// serves the limit and cursor cases.
	ws := uuid.New()
	parts := make([]part, 51)
	for i := range parts {
		parts[i] = file(fmt.Sprintf("f%02d", i), "", "x")
	}
	uploadParts(t, srv, ws.String(), srv.AdminToken, parts...)
	if n := sqlCount(t, srv, `SELECT count(DISTINCT created_at) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 1 {
		t.Fatalf("created_at of one request: got %d values, want 1", n)
	}
	all := dbOrder(t, srv, ws)

	t.Run("LimitDefault50", func(t *testing.T) {
		p := listQuery(t, srv, ws, srv.AdminToken, "")
		if got, want := p.ids(), all[:50]; !slices.Equal(got, want) {
			t.Errorf("first page: got %d uploads, want the first 50 (%v)", len(got), got)
		}
		if p.NextCursor == nil {
			t.Fatalf("next_cursor: got none, want one")
		}
		p = listQuery(t, srv, ws, srv.AdminToken, "after="+url.QueryEscape(*p.NextCursor))
		if got, want := p.ids(), all[50:]; !slices.Equal(got, want) {
			t.Errorf("second page: got %v, want %v", got, want)
		}
		if p.NextCursor != nil {
			t.Errorf("next_cursor on the last page: got %q, want absent", *p.NextCursor)
		}
	})

	t.Run("LimitBounds", func(t *testing.T) {
		for _, tt := range []struct {
			q    string
			want int
		}{{"limit=1", 1}, {"limit=100", 51}, {"limit=51", 51}, {"limit=50", 50}} {
			p := listQuery(t, srv, ws, srv.AdminToken, tt.q)
			if len(p.Uploads) != tt.want {
				t.Errorf("%s: got %d uploads, want %d", tt.q, len(p.Uploads), tt.want)
			}
			if (p.NextCursor != nil) != (tt.want < 51) {
				t.Errorf("%s: got next_cursor %v, want one exactly when more follow", tt.q, p.NextCursor)
			}
		}
	})

	t.Run("CursorWalkYieldsEachOnce", func(t *testing.T) {
		// A second request's files after the first's, sharing their own
		// created_at.
		more := uploadParts(t, srv, ws.String(), srv.AdminToken, file("g1", "", "y"), file("g2", "", "y"), file("g3", "", "y"))
		defer func() {
			for _, f := range more {
				wantStatus(t, post(t, ackURL(srv, ws.String(), f.FileID), srv.AdminToken, "", nil), http.StatusOK)
			}
		}()
		want := dbOrder(t, srv, ws)
		if len(want) != 54 {
			t.Fatalf("rows: got %d, want 54", len(want))
		}
		for _, limit := range []int{1, 2, 7, 50, 53, 54, 100} {
			got, pages := walk(t, srv, ws, limit)
			if !slices.Equal(got, want) {
				t.Errorf("limit %d: got %d IDs %v, want each of %d once, in order", limit, len(got), got, len(want))
			}
			if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
				t.Errorf("limit %d: got %d pages, want %d", limit, pages, wantPages)
			}
		}
	})

	t.Run("BadQuery", func(t *testing.T) {
		for _, tt := range []struct {
			name, q, msg string
		}{
			{"LimitZero", "limit=0", "invalid limit (want 1 to 100)"},
			{"Limit101", "limit=101", "invalid limit (want 1 to 100)"},
			{"LimitNegative", "limit=-1", "invalid limit (want 1 to 100)"},
			{"LimitNotANumber", "limit=abc", "invalid limit (want 1 to 100)"},
			{"LimitEmpty", "limit=", "invalid limit (want 1 to 100)"},
			{"LimitFraction", "limit=1.5", "invalid limit (want 1 to 100)"},
			{"LimitTwice", "limit=1&limit=2", "invalid limit (want 1 to 100)"},
			{"AfterGarbage", "after=abc", "invalid cursor"},
			{"AfterEmpty", "after=", "invalid cursor"},
			{"AfterBadBase64", "after=" + strings.Repeat("!", 32), "invalid cursor"},
			{"AfterTooLong", "after=" + strings.Repeat("A", 40), "invalid cursor"},
			{"AfterFileID", "after=" + uuid.NewString(), "invalid cursor"},
			{"AfterTwice", "after=abc&after=abc", "invalid cursor"},
			{"Semicolon", "limit=0;x", "invalid query string"},
			{"SemicolonAfterGoodLimit", "limit=5;x=1", "invalid query string"},
			{"BadEscape", "after=%zz", "invalid query string"},
			{"BadEscapeInKey", "%zz=1", "invalid query string"},
			{"Unknown", "limt=5", "unknown query parameter"},
			{"UnknownBesideGood", "limit=5&x=", "unknown query parameter"},
			{"UnknownBare", "limit=5&x", "unknown query parameter"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				wantError(t, get(t, listURL(srv, ws.String())+"?"+tt.q, srv.AdminToken), http.StatusBadRequest, tt.msg, nil)
			})
		}
	})
}

// TestListFarCursorIs400: a cursor Encode could never make (a time
// Postgres cannot hold) is the client's error, not a 500.
func TestListFarCursorIs400(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	far := pendinguploads.Cursor{CreatedAt: time.UnixMicro(-1 << 62)}
	res := get(t, listURL(srv, uuid.NewString())+"?after="+far.Encode(), srv.AdminToken)
	wantError(t, res, http.StatusBadRequest, "invalid cursor", nil)
}
