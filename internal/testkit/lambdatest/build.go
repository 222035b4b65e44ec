package lambdatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildTimeout bounds one go build.
const BuildTimeout = 5 * time.Minute

// builds is the per-test-binary cache of built functions. dir is created by
// the first Build and removed by Cleanup.
var builds struct {
	mu      sync.Mutex
	dir     string
	entries map[string]*buildEntry
}

type buildEntry struct {
	once sync.Once
	path string
	err  error
}

// Hello names the hello-world function Build builds from HelloPackage: not
// deployed, it tests this harness and is the cold-start baseline.
const (
	Hello        = "hello"
	HelloPackage = "./internal/testkit/lambdatest/hello"
)

// Package is the module-relative package path Build builds for fn.
func Package(fn string) string {
	pkg := fn
	switch {
	case fn == Hello:
		pkg = HelloPackage
	case !strings.Contains(fn, "/"):
		pkg = "./functions/" + fn
	}
	return "./" + path.Clean(strings.TrimPrefix(pkg, "./"))
}

// Build compiles a function as Lambda builds it, but for the host's
// architecture, and returns the path of its bootstrap binary:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=<runtime.GOARCH> go build \
//	    -tags lambda.norpc -trimpath -ldflags='-s -w' -o <dir>/bootstrap ./functions/<name>
//
// fn is a deployed function's name ("list": ./functions/list), Hello (the
// harness's own hello-world baseline), or a module-relative package path
// containing a slash ("./cmd/x"). Paths are resolved against
// the module root, found by walking up from the working directory to
// go.mod. The result is cached for the life of the test binary, in a
// directory that Cleanup removes; a failed build is cached too, and fails
// every test that asks for it, with go build's output. Build skips the test
// on a host that cannot run linux binaries. It is safe for concurrent use.
func Build(tb testing.TB, fn string) string {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skipf("lambdatest: Lambda binaries are linux binaries; cannot run them on %s", runtime.GOOS)
	}
	pkg := Package(fn)

	builds.mu.Lock()
	if builds.entries == nil {
		builds.entries = make(map[string]*buildEntry)
	}
	e := builds.entries[pkg]
	if e == nil {
		e = &buildEntry{}
		builds.entries[pkg] = e
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "lambdatest-")
		if err != nil {
			builds.mu.Unlock()
			tb.Fatalf("lambdatest: %v", err)
		}
		builds.dir = dir
	}
	dir := builds.dir
	builds.mu.Unlock()

	e.once.Do(func() { e.path, e.err = build(dir, pkg) })
	if e.err != nil {
		tb.Fatalf("lambdatest: build %s: %v", pkg, e.err)
	}
	return e.path
}

// build runs go build for pkg into <dir>/<last element of pkg>/bootstrap, so
// that the function name can be read off the binary's directory.
func build(dir, pkg string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg))); err != nil {
		return "", fmt.Errorf("no package directory: %w", err)
	}
	out, err := os.MkdirTemp(dir, path.Base(pkg)+"-")
	if err != nil {
		return "", err
	}
	// The function name is the package's base name; the random suffix only
	// keeps two packages with one base name apart.
	outDir := filepath.Join(out, path.Base(pkg))
	if err := os.Mkdir(outDir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(outDir, "bootstrap")

	// go test puts its own GOROOT/bin first on the test binary's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build",
		"-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w",
		"-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, b)
	}
	return bin, nil
}

// Cleanup removes every binary Build made in this test binary. Call it from
// TestMain after m.Run; Build must not be called afterwards.
func Cleanup() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
		builds.dir = ""
		builds.entries = nil
	}
}

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory (a package's directory under go test).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("lambdatest: no go.mod above the working directory")
		}
		dir = parent
	}
}
