package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestModules runs the client's pure logic in node
// (testdata/modules.test.mjs, node's own test runner): each error answer
// of the service read by its code whatever its message says, and by
// status and fields from a server older than codes; the incremental
// SHA-256 against node's at every length around a block; the resume of
// an upload a cut commit assembled, which sends nothing.
func TestModules(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("modules test: node is missing (scripts/ensure-tools.sh installs it)")
		}
		t.Skip("modules test: node is missing (scripts/ensure-tools.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", filepath.Join("testdata", "modules.test.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("node --test testdata/modules.test.mjs: %v\n%s", err, out)
	}
}
