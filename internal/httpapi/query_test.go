package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestQueriesOnEveryRoute: on every route, a query that does not parse,
// names a parameter the route does not define, repeats one, or holds an
// empty pair ("?&") is 400 before anything happens: the store is asked
// for nothing but the token's check, so no row, no stamp, no object, no
// redirect. Only exactly redirect=1 may redirect. Over the fake: the
// query is HTTP's own, and every change goes through the store.
func TestQueriesOnEveryRoute(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{Bucket: true})
	ws := uuid.New()
	tok := srv.Store.token(ws)
	body, ctype := form(t, file("a.txt", "text/plain", "hello"))
	// A presigned upload, committed: a bucket-held file, which redirect=1
	// would redirect to the bucket.
	commit := func(name string) []byte {
		res := post(t, presignURL(srv, ws.String()), tok, "application/json", []byte(fmt.Sprintf(`{"files":[{"name":%q,"size":3}]}`, name)))
		wantStatus(t, res, http.StatusOK)
		var pres presignAnswer
		decodeJSON(t, res.body, &pres)
		return []byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, pres.Uploads[0].UploadID))
	}
	res := post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit("big.bin"))
	wantStatus(t, res, http.StatusOK)
	var staged stagedAnswer
	decodeJSON(t, res.body, &staged)
	inBucket := staged.Files[0].FileID
	commitBody := commit("p.bin")
	// A multipart upload, for the resume and abort routes.
	parts := presignParts(t, srv, ws.String(), tok, 6<<20, nil)

	routes := []struct {
		name, method, url, ctype string
		body                     []byte
		param                    string // a parameter the route defines, to repeat
	}{
		{"Upload", "POST", uploadsURL(srv, ws.String()), ctype, body, ""},
		{"Commit", "POST", uploadsURL(srv, ws.String()), "application/json", commitBody, ""},
		{"Presign", "POST", presignURL(srv, ws.String()), "application/json", []byte(`{"files":[{"name":"q.bin","size":5}]}`), ""},
		{"List", "GET", listURL(srv, ws.String()), "", nil, "limit=1"},
		{"Content", "GET", contentURL(srv, ws.String(), inBucket), "", nil, "redirect=1"},
		{"Ack", "POST", ackURL(srv, ws.String(), inBucket), "", nil, ""},
		{"Resume", "POST", resumeURL(srv, ws.String(), parts.UploadID), "", nil, ""},
		{"Abort", "DELETE", resumeURL(srv, ws.String(), parts.UploadID), "", nil, ""},
		{"Limits", "GET", srv.URL + "/uploads/limits", "", nil, ""},
	}
	queries := []struct{ name, query string }{
		{"Unparseable", "x=%zz"},
		{"UnparseableKey", "%zz=1"},
		{"Semicolon", "a=1;b=2"},
		{"Unknown", "x=1"},
		{"UnknownBare", "x"},
		{"EmptyPair", "&"},
		{"EmptyPairs", "&&"},
		{"Repeated", ""},
	}
	before := srv.Store.callsFor(ws)
	for _, rt := range routes {
		for _, q := range queries {
			query := q.query
			if q.name == "Repeated" {
				query = "x=1&x=1"
				if rt.param != "" {
					query = rt.param + "&" + rt.param
				}
			}
			t.Run(rt.name+"/"+q.name, func(t *testing.T) {
				req := newRequest(t, rt.method, rt.url+"?"+query, tok, rt.ctype, bytes.NewReader(rt.body))
				client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("?%s: status %d, want 400", query, resp.StatusCode)
				}
				if after := srv.Store.callsFor(ws); len(after) != len(before) {
					t.Errorf("?%s asked the store for %v", query, after[len(before):])
				}
			})
		}
	}
	// And every route still does its work without a query: the requests
	// above were refused for their queries alone.
	for _, rt := range routes {
		req := newRequest(t, rt.method, rt.url, tok, rt.ctype, bytes.NewReader(rt.body))
		if res := send(t, req); res.status != http.StatusOK {
			t.Errorf("%s without a query: %d %s", rt.name, res.status, res.body)
		}
	}
}
