package contracttest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func init() {
	// Make format: uuid a checked format, not a comment.
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC4122))
}

// loadDocument loads and validates openapi.yaml at the module root.
func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(root, "openapi.yaml"))
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	// Examples are validated against their schemas too (the default).
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml does not validate: %v", err)
	}
	return doc
}

func TestDocumentValidates(t *testing.T) {
	doc := loadDocument(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi: got %q, want 3.0.x (API Gateway imports OpenAPI 3.0, not 3.1)", doc.OpenAPI)
	}
	if s, ok := doc.Components.SecuritySchemes["bearer"]; !ok || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
		t.Errorf("components.securitySchemes.bearer: want an http bearer scheme")
	}
	if s, ok := doc.Components.SecuritySchemes["session"]; !ok || s.Value.Type != "apiKey" || s.Value.In != "cookie" {
		t.Errorf("components.securitySchemes.session: want a cookie scheme")
	}
	if len(doc.Security) != 2 || doc.Security[0]["bearer"] == nil || doc.Security[1]["session"] == nil {
		t.Errorf("security: got %v, want the bearer scheme or the session cookie on every operation by default", doc.Security)
	}
}

// TestPathsAreRoutes: the document's operations are exactly
// httpapi.Routes, plus OPTIONS (the CORS preflight) on every path; each
// names the bearer scheme unless it is public (the routes the table marks
// Public, GET /uploads/limits and a download link's GET, and the
// preflights, which take no token).
func TestPathsAreRoutes(t *testing.T) {
	doc := loadDocument(t)
	want, publicRoute := map[string]bool{}, map[string]bool{}
	for _, r := range httpapi.Routes {
		want[r.Method+" "+r.Path] = true
		want["OPTIONS "+r.Path] = true
		publicRoute[r.Method+" "+r.Path] = r.Public
	}
	got := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			got[key] = true
			public := method == "OPTIONS" || publicRoute[key]
			switch {
			case public && (op.Security == nil || len(*op.Security) != 0):
				t.Errorf("%s: want security: [] (no token)", key)
			case !public && op.Security != nil:
				t.Errorf("%s: overrides the document's bearer security", key)
			}
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("openapi.yaml lacks %s (httpapi.Routes)", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("openapi.yaml has %s, which httpapi.Routes does not serve", k)
		}
	}
}

// TestStatusesDeclared: the answers API.md lists for each route are in
// the document, so a client generated from it knows them.
func TestStatusesDeclared(t *testing.T) {
	doc := loadDocument(t)
	want := map[string][]string{
		"POST /workspaces/{workspaceId}/chat/uploads":                    {"200", "400", "401", "403", "404", "405", "409", "413", "500", "503"},
		"POST /workspaces/{workspaceId}/chat/uploads/presign":            {"200", "400", "401", "403", "404", "405", "409", "413", "500", "503"},
		"GET /workspaces/{workspaceId}/pending-uploads":                  {"200", "400", "401", "403", "405", "500", "503"},
		"GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content": {"200", "206", "307", "400", "401", "403", "404", "405", "416", "500", "503"},
		"POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack":    {"200", "400", "401", "403", "404", "405", "500", "503"},
		"GET /uploads/limits": {"200", "400", "405"},
		"OPTIONS /workspaces/{workspaceId}/pending-uploads/{fileId}/content": {"204"},
	}
	for key, statuses := range want {
		method, path, _ := strings.Cut(key, " ")
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s: not in openapi.yaml", key)
			continue
		}
		var got []string
		for code := range item.GetOperation(method).Responses.Map() {
			got = append(got, code)
		}
		slices.Sort(got)
		slices.Sort(statuses)
		if !slices.Equal(got, statuses) {
			t.Errorf("%s: statuses %v, want %v", key, got, statuses)
		}
	}
}
