package browsertest

// Test-only stand-ins: remove when the real CORS and limits land
// (CORS_ALLOWED_ORIGINS in internal/httpapi, GET /uploads/limits with
// MAX_FILE_BYTES). Until then they give the test server what API.md's
// "CORS" and "GET /uploads/limits" sections say the service answers.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// corsShim answers per API.md's CORS section: for a listed Origin, the
// preflight OPTIONS of any path is 204 with the allowed methods and
// headers, and every answer carries Access-Control-Allow-Origin and
// -Expose-Headers; other origins get no CORS headers at all.
func corsShim(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !slices.Contains(allowed, origin) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "Content-Disposition, Content-Digest, Content-Range")
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Range")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitsShim serves GET /uploads/limits (public, no token) from cfg and
// passes everything else to next.
func limitsShim(cfg config.Config, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/uploads/limits" {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"error":"method not allowed"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"per_file_bytes":              pendinguploads.MaxFileBytes,
			"per_request_bytes":           cfg.MaxRequestBytes,
			"max_attachments_per_message": 64,
			"presign":                     strings.TrimSpace(cfg.ContentBucket) != "",
		})
	})
}
