package deploytest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// samMinVersion is the SAM CLI scripts/deploy.sh requires: the first
// whose sam package uploads the AWS::Include'd files of a template that
// also lists AWS::LanguageExtensions (aws/aws-sam-cli#9027, fixed by
// #9030 in v1.161.1).
const samMinVersion = "1.161.1"

// TestDeployChecksSAMVersion: make deploy (scripts/deploy.sh) runs
// `sam --version` before it builds, and a SAM CLI older than 1.161.1, a
// version line it cannot read, or no sam at all stops it with a line that
// names the version needed, before sam build; a new enough one builds,
// then deploys with the script's arguments. sam is a stub on PATH that
// prints a version and records its other calls.
func TestDeployChecksSAMVersion(t *testing.T) {
	t.Parallel()
	script := filepath.Join(root(t), "scripts", "deploy.sh")
	run := func(t *testing.T, version string, exit int) (stderr string, code int, calls string) {
		t.Helper()
		stubs := t.TempDir()
		log := filepath.Join(stubs, "calls")
		if version != "" {
			// A warning on stderr, as Python's may be, is not the version.
			sam := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'a warning' >&2; echo '" + version + "'; exit " + strconv.Itoa(exit) + "; fi\n" +
				"echo \"sam $*\" >> " + log + "\n"
			if err := os.WriteFile(filepath.Join(stubs, "sam"), []byte(sam), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(script, "--guided", "--parameter-overrides", "PushEndpoint=off")
		// PATH: the stubs and the shell's own tools only, so that a real
		// sam on this machine is never found.
		cmd.Env = []string{"PATH=" + stubs + string(os.PathListSeparator) + "/usr/bin:/bin", "HOME=" + stubs}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(log)
		return errb.String(), code, string(b)
	}

	for _, tc := range []struct {
		name, version string
		exit          int
	}{
		{"Refused1.160.0", "SAM CLI, version 1.160.0", 0},
		{"Refused1.160.1", "SAM CLI, version 1.160.1", 0},
		{"Refused1.161.0", "SAM CLI, version 1.161.0", 0},
		{"Refused1.9.999", "SAM CLI, version 1.9.999", 0},
		{"Refused0.999.0", "SAM CLI, version 0.999.0", 0},
		{"RefusedGarbage", "command not found: sam-cli", 0},
		{"RefusedEmpty", " ", 0},
		{"RefusedVersionPrefixOnly", "SAM CLI, version 1.161", 0},
		{"RefusedVersionFailed", "SAM CLI, version 1.200.3", 1},
		{"RefusedNoSam", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr, code, calls := run(t, tc.version, tc.exit)
			if code == 0 {
				t.Errorf("exit 0 with %q; want refused", tc.version)
			}
			if !strings.Contains(stderr, "SAM CLI "+samMinVersion+" or later is needed") {
				t.Errorf("stderr %q: want the version needed named", stderr)
			}
			if calls != "" {
				t.Errorf("sam ran %q; want nothing built or deployed", calls)
			}
		})
	}
	for _, v := range []string{"1.161.1", "1.161.2", "1.162.0", "1.200.3", "2.0.0", "1.161.1.dev202606010901"} {
		t.Run("Accepted"+v, func(t *testing.T) {
			stderr, code, calls := run(t, "SAM CLI, version "+v, 0)
			if want := "sam build\nsam deploy --guided --parameter-overrides PushEndpoint=off\n"; code != 0 || calls != want {
				t.Errorf("exit %d, sam calls %q, stderr %q; want 0 and %q", code, calls, stderr, want)
			}
		})
	}
}

// TestSAMVersionOneHome: every "SAM CLI X or later" of the docs,
// samconfig.toml and the Makefile is the version scripts/deploy.sh
// checks, which is the one this package's test holds it to.
func TestSAMVersionOneHome(t *testing.T) {
	dir := root(t)
	script, err := os.ReadFile(filepath.Join(dir, "scripts", "deploy.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^SAM_MIN_VERSION=` + regexp.QuoteMeta(samMinVersion) + `$`).Match(script) {
		t.Errorf("scripts/deploy.sh: want SAM_MIN_VERSION=%s", samMinVersion)
	}
	files := []string{"README.md", "samconfig.toml", "Makefile", "lambda.mk"}
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, strings.TrimPrefix(d, dir+string(filepath.Separator)))
	}
	// "SAM CLI 1.161.1 or later", across a line break and a comment's #.
	said := regexp.MustCompile(`SAM\s+(?:#\s*)?CLI\s+(?:#\s*)?(\d+\.\d+\.\d+)\s+(?:#\s*)?or\s+(?:#\s*)?later`)
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range said.FindAllStringSubmatch(string(b), -1) {
			found++
			if m[1] != samMinVersion {
				t.Errorf("%s says %q; the deploy checks for %s", f, m[0], samMinVersion)
			}
		}
	}
	if found == 0 {
		t.Errorf("no file says which SAM CLI the deploy needs (SAM CLI %s or later)", samMinVersion)
	}
}
