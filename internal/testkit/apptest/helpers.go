package apptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TamperProxy is a loopback proxy in front of target that corrupts the
// answers of the content route that carry bytes (200, 206): with flip, it
// inverts the first byte of the body; each of header's fields replaces
// the answer's, or removes it when "" (a Repr-Digest altered, or dropped
// as a server before it would). Clients under test must refuse what
// comes through it.
func TamperProxy(tb testing.TB, target string, flip bool, header map[string]string) string {
	tb.Helper()
	return proxy(tb, target, func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/content") ||
			(resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent) {
			return nil
		}
		for k, v := range header {
			if v == "" {
				resp.Header.Del(k)
			} else {
				resp.Header.Set(k, v)
			}
		}
		if flip {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			b[0] ^= 0xff
			resp.Body = io.NopCloser(bytes.NewReader(b))
		}
		return nil
	})
}

// ErrorProxy is a loopback proxy in front of target that passes the JSON
// body of every error answer (4xx, 5xx) through edit: what a server that
// words its messages otherwise, or carries no code, would answer.
func ErrorProxy(tb testing.TB, target string, edit func(body map[string]any)) string {
	tb.Helper()
	return proxy(tb, target, func(resp *http.Response) error {
		if resp.StatusCode < 400 {
			return nil
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			edit(body)
			raw, _ = json.Marshal(body)
		}
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		resp.ContentLength = int64(len(raw))
		resp.Header.Set("Content-Length", strconv.Itoa(len(raw)))
		return nil
	})
}

// proxy is a loopback reverse proxy in front of target that passes every
// answer through modify, until the test ends.
func proxy(tb testing.TB, target string, modify func(*http.Response) error) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = modify
	ps := httptest.NewServer(rp)
	tb.Cleanup(ps.Close)
	return ps.URL
}

// DirFiles returns the regular files of dir by name, leaving out the
// entry named skip (a state folder).
func DirFiles(tb testing.TB, dir, skip string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == skip {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}
