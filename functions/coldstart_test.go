package functions_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// BenchmarkColdStart measures each function's cold start as a client sees
// it: every iteration starts a fresh process under the Runtime API and
// invokes it once with its sample event (a real database behind), and the
// time from process start to its first answer is reported as
// first-response-ms (lambdatest's FirstResponseLatency), with init-ms (to
// its first invocation/next, Lambda's Init Duration), medians over the
// iterations. lambdatest.Hello (the test kit's bare aws-lambda-go echo),
// built the same way, is the baseline: started right after each start of
// the function, and reported beside it (hello-first-response-ms,
// hello-init-ms), so that a ratio compares starts made at the same moment.
//
// It also reports the size of the bootstrap in bytes: host-bytes for the
// binary it runs (the host's architecture), arm64-bytes for the one
// lambda.mk ships (GOARCH=arm64, same flags):
//
//	go test ./functions -run '^$' -bench ColdStart -benchtime 20x
func BenchmarkColdStart(b *testing.B) {
	fns := []string{lambdatest.Hello, "upload", "presign", "list", "content", "ack", "sweep", "migrate", "admin"}
	// Every binary first: a build writing files while another function's
	// starts are timed would be timed too.
	for _, fn := range fns {
		lambdatest.Build(b, fn)
		arm64Bootstrap(b, fn)
	}
	for _, fn := range fns {
		b.Run(fn, func(b *testing.B) {
			bin := lambdatest.Build(b, fn)
			var env []string
			var event []byte
			switch fn {
			case lambdatest.Hello:
				event = []byte(`{"hello":"world"}`)
			case "sweep":
				env = []string{"DATABASE_URL=" + pgtest.MustURL(b)}
				event = readEvent(b, fn)
			case "migrate":
				// A Create on a migrated database: connect, take the
				// lock, find no change, answer the ResponseURL.
				env = []string{"DATABASE_URL=" + pgtest.MustURL(b)}
				url, puts := cfnServer(b)
				go func() {
					for range puts {
					}
				}()
				event = migrateEvent(b, url, cfn.RequestCreate)
			default:
				env = dbEnv(pgtest.MustURL(b))
				event = readEvent(b, fn)
			}

			// Each start of fn is paired with a start of hello right after
			// it, and the report divides their medians: on two shared
			// cores the machine's pace drifts by a fifth within a minute,
			// and a baseline measured at another moment would carry that.
			start := func(bin string, env []string, event []byte) (first, init time.Duration) {
				rt := lambdatest.Start(b, bin, env)
				defer rt.Stop()
				ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
				defer cancel()
				res, err := rt.Invoke(ctx, event)
				if err != nil {
					b.Fatal(err)
				}
				if res.Err != nil {
					b.Fatalf("function error: %v", res.Err)
				}
				return rt.FirstResponseLatency(), rt.InitDuration()
			}
			hello := lambdatest.Build(b, lambdatest.Hello)
			var first, init, helloFirst, helloInit []time.Duration
			b.ResetTimer()
			for range b.N {
				f, i := start(bin, env, event)
				first, init = append(first, f), append(init, i)
				b.StopTimer()
				f, i = start(hello, nil, []byte(`{"hello":"world"}`))
				helloFirst, helloInit = append(helloFirst, f), append(helloInit, i)
				b.StartTimer()
			}
			// Medians: one process start in a few meets a busy core, and a
			// mean would be that start's.
			b.ReportMetric(float64(median(first).Microseconds())/1e3, "first-response-ms")
			b.ReportMetric(float64(median(init).Microseconds())/1e3, "init-ms")
			b.ReportMetric(float64(median(helloFirst).Microseconds())/1e3, "hello-first-response-ms")
			b.ReportMetric(float64(median(helloInit).Microseconds())/1e3, "hello-init-ms")
			b.StopTimer()
			b.ReportMetric(fileSize(b, bin), "host-bytes")
			b.ReportMetric(fileSize(b, arm64Bootstrap(b, fn)), "arm64-bytes")
		})
	}
}

// median of ds (sorted in place).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func fileSize(tb testing.TB, path string) float64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(fi.Size())
}

// arm64Builds caches arm64Bootstrap's binaries for the test binary's life.
var arm64Builds struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// arm64Bootstrap builds fn (lambdatest.Package) exactly as lambda.mk's
// LAMBDA_BUILD does (CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags
// lambda.norpc -trimpath -ldflags='-s -w') and returns the binary's path.
// The binary is only measured, never run.
func arm64Bootstrap(tb testing.TB, fn string) string {
	tb.Helper()
	arm64Builds.Lock()
	defer arm64Builds.Unlock()
	if p, ok := arm64Builds.paths[fn]; ok {
		return p
	}
	if arm64Builds.dir == "" {
		dir, err := os.MkdirTemp("", "functions-arm64-")
		if err != nil {
			tb.Fatal(err)
		}
		arm64Builds.dir = dir
		arm64Builds.paths = make(map[string]string)
	}
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(arm64Builds.dir, fn, "bootstrap")
	// go test puts its own GOROOT/bin first on the test binary's PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(gobin, "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, lambdatest.Package(fn))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s for arm64: %v\n%s", fn, err, b)
	}
	arm64Builds.paths[fn] = out
	return out
}

// removeARM64Builds removes what arm64Bootstrap built; TestMain calls it.
func removeARM64Builds() {
	arm64Builds.Lock()
	defer arm64Builds.Unlock()
	if arm64Builds.dir != "" {
		os.RemoveAll(arm64Builds.dir)
		arm64Builds.dir = ""
	}
}
