package browsertest

// Test-only stand-in: remove when GET /uploads/limits lands (with
// MAX_FILE_BYTES). Until then it gives the test server what the contract's
// "GET /uploads/limits" section says the service answers.

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

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
		for _, o := range cfg.CORSAllowedOrigins {
			fabricated(w, r, o)
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
