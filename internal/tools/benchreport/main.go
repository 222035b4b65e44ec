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
	"cmp"
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
	coldIter := flag.Int("coldstart-iterations", 15, "cold starts of each function")
	latencyIter := flag.Int("latency-iterations", 300, "calls of each latency-mode benchmark, per run")
	rtt := flag.String("rtt", "1ms", "the round trip of the latency mode (BENCH_RTT)")
	floorTime := flag.String("floor-benchtime", "2s", "-benchtime of each BenchmarkFloor case, per run (its three servers share it)")
	flag.Parse()

	steps := []struct {
		name, pkg string
		args      []string
		env       []string
	}{
		{"latency (loopback and at " + *rtt + " RTT)", "./internal/bench/", []string{"-bench", "^BenchmarkLatency$", "-count", strconv.Itoa(*count), "-benchtime", fmt.Sprintf("%dx", *latencyIter)}, []string{"BENCH_RTT=" + *rtt}},
		{"floor (loopback HTTP)", "./internal/bench/", []string{"-bench", "^BenchmarkFloor$", "-count", strconv.Itoa(*count), "-benchtime", *floorTime}, nil},
		{"commit by size", "./internal/pendinguploads/", []string{"-bench", "^BenchmarkCommit$", "-benchtime", "5x"}, nil},
		{"upload, content, batch", "./internal/bench/", []string{"-bench", "^Benchmark(Upload|Content|Batch)$", "-benchmem", "-count", strconv.Itoa(*count), "-benchtime", *benchtime}, nil},
		{"heap", "./internal/bench/", []string{"-bench", "^BenchmarkHeap$", "-benchmem", "-benchtime", "5x"}, nil},
		{"list", "./internal/bench/", []string{"-bench", "^BenchmarkList$", "-benchmem", "-benchtime", fmt.Sprintf("%dx", *listIter)}, nil},
		{"sweep", "./internal/bench/", []string{"-bench", "^BenchmarkSweep$", "-benchtime", "1x"}, nil},
		{"cold start", "./functions/", []string{"-bench", "^BenchmarkColdStart$", "-benchtime", fmt.Sprintf("%dx", *coldIter)}, nil},
		{"warm upload through the binary", "./functions/", []string{"-bench", "^BenchmarkWarmUpload$", "-count", strconv.Itoa(*count), "-benchtime", fmt.Sprintf("%dx", *latencyIter)}, nil},
		{"uploads in parts", "./internal/bench/", []string{"-bench", "^BenchmarkParts$", "-benchtime", "1x"}, nil},
		// Two more runs of the commit of parts (and of the one-PUT commit of
		// the same sizes), for medians: moto's assembly is noisy.
		{"commit of parts by size", "./internal/pendinguploads/", []string{"-bench", "^BenchmarkCommit$/^(25|100)MiB$/^parts$", "-benchtime", "5x", "-count", "2"}, nil},
	}
	res := results{}
	failed := false
	start := time.Now()
	for _, s := range steps {
		args := append([]string{"test", "-run", "^$", "-timeout", "20m"}, s.args...)
		args = append(args, s.pkg)
		fmt.Printf("=== %s: go %s\n", s.name, strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), s.env...)
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
	report(os.Stdout, res, time.Since(start), *rtt)
	reportParts(os.Stdout, res)
	reportWarm(os.Stdout, res)
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

// medianRun is the run of name whose unit is the median over the runs
// (the lower middle of an even count), and whether one was measured.
func (r results) medianRun(name, unit string) (map[string]float64, bool) {
	var runs []map[string]float64
	for _, m := range r[name] {
		if _, ok := m[unit]; ok {
			runs = append(runs, m)
		}
	}
	if len(runs) == 0 {
		return nil, false
	}
	slices.SortFunc(runs, func(a, b map[string]float64) int { return cmp.Compare(a[unit], b[unit]) })
	return runs[(len(runs)-1)/2], true
}

func verdict(ok bool, miss string) string {
	if ok {
		return "PASS"
	}
	return "MISS " + miss
}

func report(w io.Writer, r results, took time.Duration, rtt string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n================ pendinguploads bench report ================\n")
	p("%d cores (GOMAXPROCS %d), %s %s/%s; benchmarks took %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, took.Round(time.Second))
	p("Handlers are called directly (as the Lambda adapter calls them, no TCP; the floor section alone\ngoes over loopback HTTP), on the same throwaway Postgres as their baselines; times are medians of the runs.\n")

	p("\nLatency: handlers with a workspace token vs raw pgx doing the same database work,\n")
	p("on loopback and with Postgres behind a proxy adding %s of round trip (half each way);\n", rtt)
	p("targets: content, list and ack <= 1.2x raw, upload <= 1.3x raw; trips = database round trips per call\n")
	p("  %-22s %-6s %10s %10s %7s %6s  %s\n", "call", "rtt", "handler", "raw", "ratio", "trips", "verdict")
	for _, c := range []struct {
		name, label string
		target      float64
	}{
		{"upload/size=64KiB", "upload 64 KiB", 1.3}, {"upload/size=1MiB", "upload 1 MiB", 1.3},
		{"content/size=64KiB", "content 64 KiB", 1.2}, {"content/size=1MiB", "content 1 MiB", 1.2},
		{"list", "list (50 of 200)", 1.2}, {"ack", "ack", 1.2},
	} {
		for _, mode := range []string{"rtt=0", "rtt=" + rtt} {
			base := "BenchmarkLatency/" + mode + "/" + c.name
			hv, ok1 := r.get(base+"/handler", "ns/op")
			rv, ok2 := r.get(base+"/raw", "ns/op")
			label := strings.TrimPrefix(mode, "rtt=")
			if label == "0" {
				label = "0 (lo)"
			}
			if !ok1 || !ok2 {
				p("  %-22s %-6s not measured\n", c.label, label)
				continue
			}
			trips, _ := r.get(base+"/handler", "trips/op")
			ratio := hv / rv
			p("  %-22s %-6s %8.3fms %8.3fms %6.2fx %6.2f  %s\n", c.label, label, hv/1e6, rv/1e6, ratio, trips,
				verdict(ratio <= c.target, fmt.Sprintf("by %.0f%% over %.1fx", (ratio/c.target-1)*100, c.target)))
		}
	}
	p("  (a commit is 2 round trips: the token and the presigned uploads before the bucket is touched, then one\n   transaction; see the commit section. TestRoundTripsPerRequest holds every count.)\n")

	p("\nFloor: the service over loopback HTTP vs the least net/http code running the same SQL on the same\n")
	p("pool (BenchmarkFloor), the three servers called in turn, one keep-alive client, real TCP; service = the\n")
	p("dev server's handler (reqlog over the Mux), mux = the Mux alone (a function's handler); target <= 1.25x\n")
	p("  %-16s %9s %9s %7s %7s %7s %7s  %-17s  %s\n", "call", "floor", "service", "ratio", "p50", "mux", "cpu", "allocs/req f→s", "verdict")
	for _, c := range []struct{ name, label string }{
		{"list", "list (50 of 200)"}, {"content/size=1MiB", "content 1 MiB"}, {"upload/size=1MiB", "upload 1 MiB"},
	} {
		// One run's numbers, the run of the median ratio: medians taken
		// metric by metric would pair times from different runs.
		m, ok := r.medianRun("BenchmarkFloor/"+c.name, "ratio")
		if !ok {
			p("  %-16s not measured\n", c.label)
			continue
		}
		fv, sv, ratio, p50, mux, cpu := m["floor-ns/req"], m["service-ns/req"], m["ratio"], m["p50-ratio"], m["mux-ratio"], m["cpu-ratio"]
		fa, sa := m["floor-allocs/req"], m["service-allocs/req"]
		p("  %-16s %7.3fms %7.3fms %6.2fx %6.2fx %6.2fx %6.2fx  %-17s  %s\n", c.label, fv/1e6, sv/1e6, ratio, p50, mux, cpu,
			fmt.Sprintf("%.0f → %.0f", fa, sa), verdict(ratio <= 1.25, fmt.Sprintf("by %.0f%% over the 1.25x target", (ratio/1.25-1)*100)))
	}
	p("  (the run of the median ratio; ratio: mean service / mean floor, per call; p50: the median of each\n   iteration's service / floor; cpu: this process's CPU per call, client included, Postgres not;\n   allocations counted around each server's handler)\n")

	p("\nCommit of a presigned upload, by size, in moto (ms per commit; moto's own CopyObject of the\nsame object beside it: what the commit adds is the service's part; target: flat, no byte read)\n")
	p("  %-7s %10s %10s %10s %6s\n", "size", "commit", "moto copy", "added", "trips")
	var added []float64
	for _, size := range []string{"1MiB", "25MiB", "100MiB"} {
		cv, ok1 := r.get("BenchmarkCommit/"+size, "ms/commit")
		mv, ok2 := r.get("BenchmarkCommit/"+size+"/moto-copy", "ms/copy")
		if !ok1 || !ok2 {
			p("  %-7s not measured\n", size)
			continue
		}
		trips, _ := r.get("BenchmarkCommit/"+size, "trips/op")
		added = append(added, cv-mv)
		p("  %-7s %8.1fms %8.1fms %8.1fms %6.2f\n", size, cv, mv, cv-mv, trips)
	}
	if len(added) == 3 {
		p("  added 1 MiB -> 100 MiB: %+.1fms (the function reads no byte of the file: s3blobs TestCopyMeasured)\n", added[2]-added[0])
	}

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

	p("\nCold start through the Runtime API, vs a hello-world (lambdatest.Hello) built the same way (aim: init <= 1.5x)\n")
	p("  first answer = process start to the first event's answer (with its real Postgres work);\n  init = process start to its first /next (Lambda's Init Duration); medians. Each start is paired\n  with a start of hello right after it, and the ratios divide by those hello starts\n")
	p("  %-8s %12s %12s %11s %7s %9s %7s  %s\n", "function", "host bytes", "arm64 bytes", "first ans.", "ratio", "init", "ratio", "verdict (init)")
	for _, fn := range []string{"hello", "upload", "presign", "list", "content", "ack", "sweep", "migrate"} {
		name := "BenchmarkColdStart/" + fn
		f, ok := r.get(name, "first-response-ms")
		hf, okh := r.get(name, "hello-first-response-ms")
		if !ok || !okh {
			p("  %-8s not measured\n", fn)
			continue
		}
		in, _ := r.get(name, "init-ms")
		hi, _ := r.get(name, "hello-init-ms")
		hb, _ := r.get(name, "host-bytes")
		ab, _ := r.get(name, "arm64-bytes")
		v := ""
		if fn != "hello" {
			v = verdict(in/hi <= 1.5, fmt.Sprintf("by %.0f%%", (in/hi/1.5-1)*100))
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

// reportParts is the section of uploads in parts: a 100 MiB upload
// through a link limited per connection, in one PUT and in parts with 1,
// 2 and 4 in flight (BenchmarkParts), and the commit of a file sent in
// parts, by size, beside moto's own assembly, copy, head and delete
// (BenchmarkCommit's NMiB/parts).
func reportParts(w io.Writer, r results) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	link, _ := r.get("BenchmarkParts/one-put", "link-MiB/s")
	p("\nUpload of 100 MiB with the Go client to moto through a link of %.0f MiB/s per connection\n", link)
	p("(testkit/throttle; BENCH_PART_RATE): one PUT, and 13 parts of 8 MiB with 1, 2, 4 in flight\n")
	p("(target: the PUTs of 4 in flight at least 3x as fast as one PUT: 13 parts go in 4 rounds;\n")
	p(" the commit is moto assembling the parts in its own process, which S3 does inside its fleet)\n")
	p("  %-10s %9s %9s %9s %10s %9s %9s %9s\n", "how", "total", "hash", "PUTs", "commit", "MiB/s", "total vs", "PUTs vs")
	base, okBase := r.get("BenchmarkParts/one-put", "s/upload")
	basePut, _ := r.get("BenchmarkParts/one-put", "put-s")
	for _, c := range []struct{ name, label string }{{"one-put", "one PUT"}, {"parts=1", "1 part"}, {"parts=2", "2 parts"}, {"parts=4", "4 parts"}} {
		name := "BenchmarkParts/" + c.name
		total, ok := r.get(name, "s/upload")
		if !ok {
			p("  %-10s not measured\n", c.label)
			continue
		}
		hash, _ := r.get(name, "hash-s")
		put, _ := r.get(name, "put-s")
		commit, _ := r.get(name, "commit-ms")
		rate, _ := r.get(name, "MiB/s")
		vs := ""
		if okBase {
			vs = fmt.Sprintf("%8.2fx %8.2fx", base/total, basePut/put)
			if c.name == "parts=4" {
				vs += "  " + verdict(basePut/put >= 3, "(PUTs less than 3x as fast)")
			}
		}
		p("  %-10s %8.2fs %8.2fs %8.2fs %8.0fms %9.1f %s\n", c.label, total, hash, put, commit, rate, vs)
	}

	p("\nCommit of a file sent in parts (8 MiB), by size, in moto (ms per commit; beside it, moto's own\n")
	p("CompleteMultipartUpload, CopyObject, HeadObject and DeleteObject: the commit's bucket calls but ListParts;\n")
	p("target: what the commit adds is flat)\n")
	p("  %-7s %10s %14s %10s %6s\n", "size", "commit", "moto assembly", "added", "trips")
	var added []float64
	for _, size := range []string{"25MiB", "100MiB"} {
		cv, ok1 := r.get("BenchmarkCommit/"+size+"/parts", "ms/commit")
		mv, ok2 := r.get("BenchmarkCommit/"+size+"/parts/moto", "ms/assembly")
		if !ok1 || !ok2 {
			p("  %-7s not measured\n", size)
			continue
		}
		trips, _ := r.get("BenchmarkCommit/"+size+"/parts", "trips/op")
		added = append(added, cv-mv)
		p("  %-7s %8.1fms %12.1fms %8.1fms %6.2f\n", size, cv, mv, cv-mv, trips)
	}
	if len(added) == 2 {
		p("  added 25 MiB -> 100 MiB: %+.1fms  %s (moto's own time moves by about 100 ms between runs)\n", added[1]-added[0],
			verdict(added[1]-added[0] < 100, "(grows with the size)"))
	}
}

// reportWarm prints BenchmarkWarmUpload: one upload's latency through the
// upload function's binary, warm, before and after issue 42 (the hint to
// IoT Core's endpoint and the password; the hint table and IAM database
// authentication), with moto's own PutItem beside them. The target: what
// the change adds is the hint table's write, no more (after - before <=
// 1.5 x putitem).
func reportWarm(w io.Writer, r results) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\nWarm upload through the upload function's binary (Runtime API, events/upload.json, push on; medians):\n")
	med := func(name string) (float64, bool) { return r.get("BenchmarkWarmUpload/"+name, "ns/op") }
	before, ok1 := med("before")
	table, ok2 := med("hinttable")
	after, ok3 := med("after")
	put, ok4 := med("putitem")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		p("  not measured\n")
		return
	}
	p("  before (password, IoT Publish) %.3fms; hint table %.3fms; after (hint table, IAM stand-in) %.3fms\n", before/1e6, table/1e6, after/1e6)
	p("  moto's PutItem alone %.3fms; after - before %.3fms  %s\n", put/1e6, (after-before)/1e6,
		verdict(after-before <= 1.5*put, "the change adds more than the hint table's write"))
}
