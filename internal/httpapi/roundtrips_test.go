package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
)

// TestRoundTripsPerRequest holds what each request costs in Postgres
// round trips, for every kind of credential, in steady state (statements
// prepared, the token's last_used_at fresh): the token check rides in the
// same round trip as the request's work. List, content (a file up to
// 1 MiB, inline), ack, a multipart upload and a presign: one; a commit:
// two (the token and the presigned uploads before anything touches the bucket,
// then one transaction). A session's control-plane call is counted
// apart: none while its verdict is cached, one (and still one Postgres
// round trip) when it is not.
func TestRoundTripsPerRequest(t *testing.T) {
	t.Parallel()
	cp := cptest.Start(t, tenantSlug)
	env := cp.Env()
	env["PUBLIC_ORIGIN"] = publicOrigin
	o := newOrgSetup(t, apptest.Options{S3: true, CountRoundTrips: true, Env: env})
	srv, ws := o.srv, o.child1
	platformTok := func() string {
		_, tok := platformWorkspaceIn(t, srv, ws)
		return tok
	}
	cp.AddMember("rt-session", "user-rt")
	creds := []struct {
		name string
		set  func(r *http.Request)
	}{
		{"Admin", bearerOf(srv.AdminToken)},
		{"Workspace", bearerOf(platformTok())},
		{"Org", bearerOf(o.mintOrgToken(t, &o.root1))},
		{"Session", func(r *http.Request) {
			r.Header.Set("Cookie", cptest.CookieName+"=rt-session")
			r.Header.Set("Origin", publicOrigin)
		}},
	}
	for _, cred := range creds {
		t.Run(cred.name, func(t *testing.T) {
			roundTrips(t, srv, cp, ws, cred.set)
		})
	}
	t.Run("SessionNotCached", func(t *testing.T) {
		for i := range 2 {
			session := fmt.Sprintf("fresh-session-%d", i)
			cp.AddMember(session, "user-fresh")
			srv.RoundTrips.Reset()
			cpBefore := cp.Calls()
			req := newRequest(t, "GET", listURL(srv, ws.String()), "", "", nil)
			req.Header.Set("Cookie", cptest.CookieName+"="+session)
			wantStatus(t, send(t, req), http.StatusOK)
			if got, cpCalls := srv.RoundTrips.Count(), cp.Calls()-cpBefore; got != 1 || cpCalls != 1 {
				t.Fatalf("a session not cached: %d Postgres round trips and %d control-plane calls, want 1 and 1", got, cpCalls)
			}
		}
	})
}

func bearerOf(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// roundTrips checks the round trips of every route for one credential.
func roundTrips(t *testing.T, srv *apptest.Server, cp *cptest.Server, ws uuid.UUID, cred func(*http.Request)) {
	wsID := ws.String()
	do := func(t *testing.T, method, u, ctype string, body []byte) result {
		t.Helper()
		req := newRequest(t, method, u, "", ctype, bytes.NewReader(body))
		cred(req)
		return send(t, req)
	}
	body, ctype := form(t, file("a.txt", "text/plain", "round trips"))
	var fileIDs []string
	upload := func(t *testing.T) {
		res := do(t, "POST", uploadsURL(srv, wsID), ctype, body)
		wantStatus(t, res, http.StatusOK)
		var out stagedAnswer
		if err := json.Unmarshal(res.body, &out); err != nil {
			t.Fatal(err)
		}
		fileIDs = append(fileIDs, out.Files[0].FileID)
	}
	last := func() string { return fileIDs[len(fileIDs)-1] }
	presign := func(t *testing.T) presignAnswer {
		res := do(t, "POST", presignURL(srv, wsID), "application/json", []byte(`{"files":[{"name":"p.bin","size":3}]}`))
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
		{"List", 1, func(t *testing.T) { wantStatus(t, do(t, "GET", listURL(srv, wsID), "", nil), http.StatusOK) }},
		{"Content", 1, func(t *testing.T) {
			wantStatus(t, do(t, "GET", contentURL(srv, wsID, last()), "", nil), http.StatusOK)
		}},
		{"Ack", 1, func(t *testing.T) { wantStatus(t, do(t, "POST", ackURL(srv, wsID, last()), "", nil), http.StatusOK) }},
		{"Presign", 1, func(t *testing.T) { presign(t) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for range 2 { // warm: statements prepared, the token stamped, the session's verdict cached
				c.do(t)
			}
			srv.RoundTrips.Reset()
			cpBefore := cp.Calls()
			c.do(t)
			if got := srv.RoundTrips.Count(); got != c.want {
				t.Fatalf("round trips: got %d, want %d", got, c.want)
			}
			if n := cp.Calls() - cpBefore; n != 0 {
				t.Fatalf("control-plane calls: got %d, want 0", n)
			}
		})
	}
	t.Run("Commit", func(t *testing.T) {
		commit := func(t *testing.T) {
			up := presign(t).Uploads[0]
			putObject(t, up.URL, up.Headers, []byte("abc"))
			srv.RoundTrips.Reset()
			wantStatus(t, do(t, "POST", uploadsURL(srv, wsID), "application/json",
				[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, up.UploadID))), http.StatusOK)
		}
		commit(t)
		commit(t)
		if got := srv.RoundTrips.Count(); got != 2 {
			t.Fatalf("round trips: got %d, want 2", got)
		}
	})
}
