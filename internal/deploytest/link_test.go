package deploytest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFunctionsLinkOnlyWhatTheyUse: a function links the clients it
// calls and nothing more (a package linked is a package initialised at
// every cold start): only the functions that read or write objects link
// the S3 client, and only migrate links the migrations.
func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	const (
		s3      = "github.com/aws/aws-sdk-go-v2/service/s3"
		migrate = "github.com/golang-migrate/migrate/v4"
	)
	links := map[string][]string{
		"upload": {s3}, "presign": {s3}, "content": {s3}, "sweep": {s3},
		"list": {}, "ack": {}, "migrate": {migrate}, "admin": {}, "pushauth": {},
	}
	for fn, want := range links {
		cmd := exec.Command("go", "list", "-deps", "./functions/"+fn)
		cmd.Dir = root(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./functions/%s: %v", fn, err)
		}
		deps := strings.Fields(string(out))
		for _, pkg := range []string{s3, migrate} {
			if got := slices.Contains(deps, pkg); got != slices.Contains(want, pkg) {
				t.Errorf("functions/%s links %s: %v, want %v", fn, pkg, got, !got)
			}
		}
	}
}
