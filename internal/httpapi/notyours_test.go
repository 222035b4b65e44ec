package httpapi_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestOneAnswerForNotYoursAndNotThere: content, link and ack answer a
// file id of another workspace exactly as one that is nowhere (wtf's
// ENOTFOUND): the same status, body and headers, and a log line of the
// same level, message and code; for a workspace's token on its own path
// and for the admin on another workspace's path alike. A caller learns
// nothing of other workspaces' files.
func TestOneAnswerForNotYoursAndNotThere(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	srv := apptest.NewServer(t, apptest.Options{Log: logs})
	owner, other := uuid.New(), uuid.New()
	elsewhere := stage(t, srv, owner, "theirs.txt", "text/plain", "another workspace's bytes").FileID
	otherTok := srv.WorkspaceToken(t, other)

	// ask sends a request and returns its answer and the fields of the
	// log line it wrote (the one refusal line).
	ask := func(t *testing.T, method, u, token string) (result, map[string]any) {
		t.Helper()
		before := len(logs.String())
		var res result
		if method == "GET" {
			res = get(t, u, token)
		} else {
			res = post(t, u, token, "", nil)
		}
		var line map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()[before:]), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["status"] != nil {
				if line != nil {
					t.Fatalf("two answer lines: %v and %s", line, l)
				}
				line = m
			}
		}
		if line == nil {
			t.Fatalf("%s %s: no log line of its answer in %s", method, u, logs.String()[before:])
		}
		return res, line
	}
	for _, route := range []struct {
		name, method string
		url          func(ws uuid.UUID, file string) string
	}{
		{"Content", "GET", func(ws uuid.UUID, f string) string { return contentURL(srv, ws.String(), f) }},
		{"Link", "POST", func(ws uuid.UUID, f string) string { return linkURL(srv, ws.String(), f) }},
		{"Ack", "POST", func(ws uuid.UUID, f string) string { return ackURL(srv, ws.String(), f) }},
	} {
		for _, caller := range []struct{ name, token string }{{"OwnToken", otherTok}, {"Admin", srv.AdminToken}} {
			t.Run(route.name+"/"+caller.name, func(t *testing.T) {
				theirs, theirsLine := ask(t, route.method, route.url(other, elsewhere), caller.token)
				none, noneLine := ask(t, route.method, route.url(other, uuid.NewString()), caller.token)
				if theirs.status != http.StatusNotFound || theirs.status != none.status || string(theirs.body) != string(none.body) {
					t.Errorf("another workspace's file: %d %s; a file that is nowhere: %d %s; want the same 404",
						theirs.status, theirs.body, none.status, none.body)
				}
				for _, h := range []http.Header{theirs.header, none.header} {
					h.Del("Date")
				}
				if !maps.EqualFunc(theirs.header, none.header, slices.Equal) {
					t.Errorf("headers: another workspace's file %v; a file that is nowhere %v", theirs.header, none.header)
				}
				for _, k := range []string{"level", "msg", "status", "code", "error"} {
					if theirsLine[k] != noneLine[k] {
						t.Errorf("log line's %s: another workspace's file %v; a file that is nowhere %v", k, theirsLine[k], noneLine[k])
					}
				}
				if got, want := slices.Sorted(maps.Keys(theirsLine)), slices.Sorted(maps.Keys(noneLine)); !slices.Equal(got, want) {
					t.Errorf("log line's fields: another workspace's file %v; a file that is nowhere %v", got, want)
				}
			})
		}
	}
	if fetched, acked := timestamps(t, srv, elsewhere); fetched != nil || acked != nil {
		t.Errorf("another workspace's requests touched the file: fetched_at %v, acked_at %v", fetched, acked)
	}
}
