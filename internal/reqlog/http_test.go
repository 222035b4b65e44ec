package reqlog

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

// TestMiddleware: each request gets its own id, answered in X-Request-Id
// (a client's is replaced); lines the handler logs with the request's
// context carry it, and so does the access line with the status.
func TestMiddleware(t *testing.T) {
	log, lines := capture(t)
	h := Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "inside")
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("short"))
	}), log)
	srv := httptest.NewServer(h)
	defer srv.Close()

	seen := map[string]bool{}
	for range 2 {
		req, _ := http.NewRequest("GET", srv.URL+"/a/b?secret=x", nil)
		req.Header.Set(HeaderRequestID, "client-chosen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get(HeaderRequestID)
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) || seen[id] {
			t.Fatalf("X-Request-Id %q: want a fresh 32-hex id", id)
		}
		seen[id] = true
		got := lines()
		if len(got) != 2 {
			t.Fatalf("got %d lines, want 2: %v", len(got), got)
		}
		for _, l := range got {
			if l[KeyRequestID] != id {
				t.Errorf("line %v: request_id %v, want %s", l["msg"], l[KeyRequestID], id)
			}
		}
		acc := got[1]
		if acc["msg"] != "request" || acc["status"] != float64(http.StatusTeapot) || acc["path"] != "/a/b" || acc["bytes"] != float64(5) {
			t.Errorf("access line: got %v", acc)
		}
	}
}
