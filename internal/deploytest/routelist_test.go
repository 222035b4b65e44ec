package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestBesideThePlatformRoutes: the routes deploy.md tells the platform to
// send to this API (Beside the platform, step 2) are every operation of
// openapi.yaml but the CORS preflights, which the list names in prose,
// and nothing else: a per-route proxy built from the list reaches every
// route (resume and abort, links and downloads included).
func TestBesideThePlatformRoutes(t *testing.T) {
	var want []string
	for path, item := range loadOpenAPI(t)["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch", "head":
				want = append(want, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(want)

	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, step, found := strings.Cut(string(doc), "\n2. Send these routes to this API")
	if !found {
		t.Fatal(`docs/deploy.md: no step "2. Send these routes to this API"`)
	}
	step, _, found = strings.Cut(step, "\n3. ")
	if !found {
		t.Fatal("docs/deploy.md: the route list's step 2 has no step 3 after it")
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\s*- `([A-Z]+ /[^`]*)`").FindAllStringSubmatch(step, -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	for _, op := range want {
		if !slices.Contains(got, op) {
			t.Errorf("deploy.md's route list lacks %s (openapi.yaml has it)", op)
		}
	}
	for _, op := range got {
		if !slices.Contains(want, op) {
			t.Errorf("deploy.md's route list has %s, which openapi.yaml does not", op)
		}
	}
	if len(got) != len(slices.Compact(slices.Clone(got))) {
		t.Errorf("deploy.md's route list names a route twice: %v", got)
	}
}
