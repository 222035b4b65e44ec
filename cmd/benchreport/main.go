// Command benchreport runs the service's benchmarks (internal/bench, and
// functions' BenchmarkColdStart) with `go test -bench`, echoes their
// output, and prints a short report: each measurement as a ratio against
// the baseline measured in the same run, with PASS or MISS against its
// target. `make bench` runs it.
//
// It exits non-zero when a benchmark fails to run, not when a target is
// missed: a miss is a finding for the report.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	count := flag.Int("count", 3, "runs of each upload/content/batch benchmark (the report takes medians)")
	benchtime := flag.String("benchtime", "1s", "-benchtime of the upload/content/batch benchmarks")
	listIter := flag.Int("list-iterations", 2000, "list calls timed at each table size")
	coldIter := flag.Int("coldstart-iterations", 5, "cold starts of each function")
	flag.Parse()

	steps := []struct {
		name, pkg string
		args      []string
	}{
		{"upload, content, batch", "./internal/bench/", []string{"-bench", "^Benchmark(Upload|Content|Batch)$", "-benchmem", "-count", strconv.Itoa(*count), "-benchtime", *benchtime}},
		{"heap", "./internal/bench/", []string{"-bench", "^BenchmarkHeap$", "-benchmem", "-benchtime", "5x"}},
		{"list", "./internal/bench/", []string{"-bench", "^BenchmarkList$", "-benchmem", "-benchtime", fmt.Sprintf("%dx", *listIter)}},
		{"sweep", "./internal/bench/", []string{"-bench", "^BenchmarkSweep$", "-benchtime", "1x"}},
		{"cold start", "./functions/", []string{"-bench", "^BenchmarkColdStart$", "-benchtime", fmt.Sprintf("%dx", *coldIter)}},
	}
	res := results{}
	failed := false
	start := time.Now()
	for _, s := range steps {
		args := append([]string{"test", "-run", "^$", "-timeout", "20m"}, s.args...)
		args = append(args, s.pkg)
		fmt.Printf("=== %s: go %s\n", s.name, strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fatal(err)
		}
		if err := cmd.Start(); err != nil {
			fatal(err)
		}
		res.parse(io.TeeReader(out, os.Stdout))
		if err := cmd.Wait(); err != nil {
			fmt.Printf("--- %s: %v\n", s.name, err)
			failed = true
		}
	}
	report(os.Stdout, res, time.Since(start))
	if failed {
		fmt.Println("\nbenchreport: a benchmark failed to run (see above)")
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(2)
}

// results maps a benchmark's name (without the -GOMAXPROCS suffix) to
// one map of unit → value per run.
type results map[string][]map[string]float64

func (r results) parse(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
		r[name] = append(r[name], m)
	}
}

// get is the median over runs of unit for name, and whether it was measured.
func (r results) get(name, unit string) (float64, bool) {
	var vs []float64
	for _, m := range r[name] {
		if v, ok := m[unit]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	return vs[len(vs)/2], true
}

func verdict(ok bool, miss string) string {
	if ok {
		return "PASS"
	}
	return "MISS " + miss
}

func report(w io.Writer, r results, took time.Duration) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n================ pendinguploads bench report ================\n")
	p("%d cores (GOMAXPROCS %d), %s %s/%s; benchmarks took %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, took.Round(time.Second))
	p("Handlers are called directly (as the Lambda adapter calls them, no TCP), on the\nsame throwaway Postgres as their raw-pgx baselines; times are medians of the runs.\n")

	for _, grp := range []struct{ title, base string }{
		{"Upload: upload handler vs raw pgx INSERT of the same bytes (target <= 1.25x)", "BenchmarkUpload"},
		{"Fetch: content handler (workspace token) vs raw pgx SELECT of the same row (target <= 1.25x)", "BenchmarkContent"},
	} {
		p("\n%s\n", grp.title)
		p("  %-7s %12s %12s %8s  %s\n", "size", "handler", "raw", "ratio", "verdict")
		for _, size := range []string{"64KiB", "1MiB", "4MiB"} {
			hv, ok1 := r.get(grp.base+"/size="+size+"/handler", "ns/op")
			rv, ok2 := r.get(grp.base+"/size="+size+"/raw", "ns/op")
			if !ok1 || !ok2 {
				p("  %-7s not measured\n", size)
				continue
			}
			ratio := hv / rv
			p("  %-7s %10.2fms %10.2fms %7.2fx  %s\n", size, hv/1e6, rv/1e6, ratio,
				verdict(ratio <= 1.25, fmt.Sprintf("by %.0f%% over the 1.25x target", (ratio/1.25-1)*100)))
		}
	}

	p("\nBatch: one upload of 16 files (4 KiB each) vs 16 one-file uploads\n")
	b16, ok1 := r.get("BenchmarkBatch/batch16", "ns/op")
	s16, ok2 := r.get("BenchmarkBatch/single16", "ns/op")
	s1, ok3 := r.get("BenchmarkBatch/single1", "ns/op")
	if ok1 && ok2 && ok3 {
		p("  batch of 16 %.2fms, 16 singles %.2fms, one single %.2fms\n", b16/1e6, s16/1e6, s1/1e6)
		p("  batch / 16 singles = %.2fx; batch / one single = %.2fx (16 singles / one single = %.1fx)  %s\n",
			b16/s16, b16/s1, s16/s1, verdict(b16/s16 <= 0.5, "(the batch costs more than half of 16 singles)"))
		p("  (the batch is one transaction of the same statements as a single upload; what it costs over\n   one single is its 16x the bytes: parse, SHA-256, encode, TOAST)\n")
	} else {
		p("  not measured\n")
	}

	p("\nList: first page (50) of a workspace with 10k pending rows (target p50 < 2 ms, flat)\n")
	p("  %-11s %9s %9s %13s %13s\n", "table rows", "p50", "p99", "mid-page p50", "mid-page p99")
	var p50s []float64
	for _, n := range []string{"10k", "100k", "1000k"} {
		name := "BenchmarkList/rows=" + n
		p50, ok := r.get(name, "p50-ms")
		if !ok {
			p("  %-11s not measured\n", n)
			continue
		}
		p99, _ := r.get(name, "p99-ms")
		m50, _ := r.get(name, "mid-p50-ms")
		m99, _ := r.get(name, "mid-p99-ms")
		p50s = append(p50s, p50)
		p("  %-11s %7.3fms %7.3fms %11.3fms %11.3fms  %s\n", n, p50, p99, m50, m99,
			verdict(p50 < 2, fmt.Sprintf("by %.2fms", p50-2)))
	}
	if len(p50s) == 3 {
		p("  growth 10k -> 1M rows: p50 x%.2f  %s\n", p50s[2]/p50s[0], verdict(p50s[2]/p50s[0] <= 1.5, "(p50 grows with the table)"))
	}

	p("\nSweep: a backlog of 100k acked rows, with uploads running beside it (target: max upload wait < 100 ms)\n")
	if st, ok := r.get("BenchmarkSweep", "sweep-ms"); ok {
		rps, _ := r.get("BenchmarkSweep", "rows/s")
		mw, _ := r.get("BenchmarkSweep", "max-upload-wait-ms")
		pd, _ := r.get("BenchmarkSweep", "p50-upload-during-ms")
		mi, _ := r.get("BenchmarkSweep", "max-upload-idle-ms")
		n, _ := r.get("BenchmarkSweep", "uploads-during")
		p("  total %.0fms, %.0f rows/s; %0.f uploads during it: p50 %.2fms, max %.1fms (max %.1fms in the second before)  %s\n",
			st, rps, n, pd, mw, mi, verdict(mw < 100, fmt.Sprintf("by %.0fms", mw-100)))
	} else {
		p("  not measured\n")
	}

	p("\nCold start through the Runtime API, vs a hello-world (lambdatest.Hello) built the same way (target <= 1.5x)\n")
	p("  first answer = process start to the first event's answer (with its real Postgres work);\n  init = process start to its first /next (Lambda's Init Duration)\n")
	p("  %-8s %12s %12s %11s %7s %9s %7s  %s\n", "function", "host bytes", "arm64 bytes", "first ans.", "ratio", "init", "ratio", "verdict (first answer)")
	hf, okh := r.get("BenchmarkColdStart/hello", "first-response-ms")
	hi, _ := r.get("BenchmarkColdStart/hello", "init-ms")
	for _, fn := range []string{"hello", "upload", "presign", "list", "content", "ack", "sweep", "migrate"} {
		name := "BenchmarkColdStart/" + fn
		f, ok := r.get(name, "first-response-ms")
		if !ok || !okh {
			p("  %-8s not measured\n", fn)
			continue
		}
		in, _ := r.get(name, "init-ms")
		hb, _ := r.get(name, "host-bytes")
		ab, _ := r.get(name, "arm64-bytes")
		v := ""
		if fn != "hello" {
			v = verdict(f/hf <= 1.5, fmt.Sprintf("by %.0f%%", (f/hf/1.5-1)*100))
		}
		p("  %-8s %12.0f %12.0f %9.2fms %6.2fx %7.2fms %6.2fx  %s\n", fn, hb, ab, f, f/hf, in, in/hi, v)
	}

	p("\nHeap of one call, largest inline case (file %s bytes; target peak < 3x the body)\n", fmtBody(r))
	for _, fn := range []string{"upload", "content"} {
		name := "BenchmarkHeap/" + fn
		pb, ok := r.get(name, "peak/body")
		if !ok {
			p("  %-8s not measured\n", fn)
			continue
		}
		ab, _ := r.get(name, "alloc/body")
		allocs, _ := r.get(name, "allocs/op")
		peak, _ := r.get(name, "peak-heap-B")
		p("  %-8s peak %.1f MiB = %.2fx body; allocated %.2fx body in %.0f allocations  %s\n", fn, peak/(1<<20), pb, ab, allocs,
			verdict(pb < 3, fmt.Sprintf("by %.1f%%", (pb/3-1)*100)))
	}
}

func fmtBody(r results) string {
	if v, ok := r.get("BenchmarkHeap/upload", "body-B"); ok {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return "?"
}
