package deploytest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsureToolsSaysWhatItInstalls: make test runs
// scripts/ensure-tools.sh, which installs a missing Debian package (so
// that make test works on a fresh machine, CI's included), naming it and
// how to decline before it does; under INSTALL=0 it stops with the one
// apt-get line to run and runs no apt-get. Chromium is made missing
// (CHROMIUM names a path that does not exist); apt-get and npm are stubs
// that record their calls. cfn-lint is a stub too, that prints a version:
// the script only names the real one's (its --version imports all of it,
// 2 s a run), and checks only that it is on PATH, which the test requires.
func TestEnsureToolsSaysWhatItInstalls(t *testing.T) {
	t.Parallel() // runs the script in a folder of stubs of its own, beside TestCfnLint
	for _, tool := range []string{"moto_server", "cfn-lint"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: ensure-tools stops there whatever it is asked", tool)
		}
	}
	stubs := t.TempDir()
	log := filepath.Join(stubs, "calls")
	for _, name := range []string{"apt-get", "npm", "sudo", "service"} {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\n"
		if name == "sudo" {
			script += "exec \"$@\"\n"
		}
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stubs, "cfn-lint"), []byte("#!/bin/sh\necho cfn-lint 0.0.0-stub\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fakeChromium := filepath.Join(stubs, "chromium")
	if err := os.WriteFile(fakeChromium, []byte("#!/bin/sh\necho Chromium 1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, chromium string, vars ...string) (string, int, string) {
		t.Helper()
		os.Remove(log)
		cmd := exec.Command(filepath.Join(root(t), "scripts", "ensure-tools.sh"))
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if k != "CI" && k != "INSTALL" && k != "PATH" && k != "CHROMIUM" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"), "CHROMIUM="+chromium)
		cmd.Env = append(cmd.Env, vars...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		calls, _ := os.ReadFile(log)
		return stderr.String(), code, string(calls)
	}
	missing := filepath.Join(stubs, "no-chromium")

	t.Run("Declined", func(t *testing.T) {
		stderr, code, calls := run(t, missing, "INSTALL=0")
		if code != 1 || !strings.Contains(stderr, "sudo apt-get install -y chromium") {
			t.Errorf("exit %d, stderr %q; want 1 and the apt-get line", code, stderr)
		}
		if strings.Contains(calls, "apt-get") {
			t.Errorf("apt-get ran though declined: %q", calls)
		}
	})
	for _, v := range []string{"INSTALL=", "INSTALL=1", "CI=true"} {
		t.Run(v, func(t *testing.T) {
			stderr, code, calls := run(t, missing, v)
			if code != 0 || !strings.Contains(calls, "apt-get install -y -qq chromium") {
				t.Errorf("exit %d, apt-get calls %q, stderr %q; want 0 and chromium installed", code, calls, stderr)
			}
			if !strings.Contains(stderr, "installing them now: chromium (INSTALL=0 declines)") {
				t.Errorf("stderr %q: want the packages named, and how to decline, before the install", stderr)
			}
		})
	}
	t.Run("NothingMissing", func(t *testing.T) {
		stderr, code, calls := run(t, fakeChromium)
		if code != 0 || strings.Contains(calls, "apt-get") {
			t.Errorf("exit %d, apt-get calls %q, stderr %q; want 0 and no apt-get", code, calls, stderr)
		}
	})
}
