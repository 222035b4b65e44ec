package deploytest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// An idleLine is one row of a shape's idle cost: what, how it is
// reckoned, what it costs a month.
type idleLine struct {
	what, arithmetic string
	month            float64
}

// idleGoals are the most a shape may cost a month idle (issue 42): from
// zero (every parameter at its default), and with malware scanning on
// too, $10.00; beside the platform (its database), $3.00. The proxy shape
// has none: RDS Proxy keeps the database up, for a stack busy all day
// (docs/deploy.md).
var idleGoals = map[string]float64{"FromZero": 10.00, "Scanned": 10.00, "BesideThePlatform": 3.00}

// idleCost prices every resource the shape creates from the price table
// (idleprices_test.go), failing for a type that is neither priced nor
// listed as free at rest.
func idleCost(t *testing.T, s *shape) []idleLine {
	t.Helper()
	created := s.resources()
	byType := map[string][]string{}
	for id, r := range created {
		typ := scalar(get(r, "Type"))
		byType[typ] = append(byType[typ], id)
	}
	var lines []idleLine
	add := func(what, arithmetic string, month float64) {
		lines = append(lines, idleLine{what, arithmetic, month})
	}
	hourly := func(name string, n float64) float64 { return n * prices[name].perHour * monthHours }
	for _, typ := range slices.Sorted(func(yield func(string) bool) {
		for k := range byType {
			if !yield(k) {
				return
			}
		}
	}) {
		ids := byType[typ]
		slices.Sort(ids)
		switch typ {
		case "AWS::RDS::DBCluster":
			for _, id := range ids {
				lines = append(lines, auroraIdle(t, s, id)...)
			}
		case "AWS::RDS::DBInstance":
			for _, id := range ids {
				p := get(created[id], "Properties")
				if class := s.str(get(p, "DBInstanceClass")); class != "db.serverless" || get(p, "DBClusterIdentifier") == nil {
					t.Errorf("%s: instance class %s: only an Aurora Serverless v2 instance (db.serverless, its cluster's ACUs) is priced", id, class)
				}
			}
		case "AWS::RDS::DBProxy":
			for _, id := range ids {
				add(fmt.Sprintf("RDS Proxy %s, in front of Aurora Serverless v2", id),
					fmt.Sprintf("%g ACUs (its minimum) × $%g/h × %d", proxyMinACUs, prices["rds proxy"].perHour, monthHours),
					hourly("rds proxy", proxyMinACUs))
			}
		case "AWS::EC2::VPCEndpoint":
			for _, id := range ids {
				p := get(created[id], "Properties")
				if scalar(get(p, "VpcEndpointType")) == "Gateway" {
					continue // gateway endpoints (S3, DynamoDB) are free
				}
				zones := len(get(p, "SubnetIds").Content)
				add(fmt.Sprintf("interface endpoint %s, %d zones", id, zones),
					fmt.Sprintf("%d × $%g/h × %d", zones, prices["interface endpoint"].perHour, monthHours), hourly("interface endpoint", float64(zones)))
			}
		case "AWS::SecretsManager::Secret":
			add(fmt.Sprintf("%d %s (%s)", len(ids), plural(len(ids), "secret"), strings.Join(ids, ", ")),
				fmt.Sprintf("%d × $%.2f", len(ids), prices["secret"].perMonth), float64(len(ids))*prices["secret"].perMonth)
		case "AWS::DynamoDB::Table":
			// On demand (no provisioned capacity billed by the hour): at
			// rest its storage only. The hint table's items expire by TTL
			// (push.TableTTL), so an idle stack's table holds none.
			for _, id := range ids {
				if scalar(get(created[id], "Properties", "BillingMode")) != "PAY_PER_REQUEST" {
					t.Errorf("%s: only an on-demand table (BillingMode PAY_PER_REQUEST) is priced", id)
				}
				add(fmt.Sprintf("DynamoDB table %s, on demand, empty at rest", id),
					fmt.Sprintf("0 GB × $%g", prices["dynamodb storage"].perMonth), 0)
			}
		case "AWS::CloudWatch::Alarm":
			var std, high int
			for _, id := range ids {
				p := get(created[id], "Properties")
				if period, _ := strconv.Atoi(scalar(get(p, "Period"))); period > 0 && period < 60 {
					high++
				} else {
					std++
				}
				if get(p, "Metrics") != nil {
					t.Errorf("%s: an alarm on a metric math expression bills per metric: not priced here", id)
				}
			}
			add(fmt.Sprintf("%d alarms", std), fmt.Sprintf("%d × $%.2f", std, prices["alarm"].perMonth), float64(std)*prices["alarm"].perMonth)
			if high > 0 {
				add(fmt.Sprintf("%d high-resolution alarms", high), fmt.Sprintf("%d × $%.2f", high, prices["alarm high-res"].perMonth), float64(high)*prices["alarm high-res"].perMonth)
			}
		case "AWS::CloudWatch::Dashboard":
			add(fmt.Sprintf("%d dashboard", len(ids)), fmt.Sprintf("%d × $%.2f", len(ids), prices["dashboard"].perMonth), float64(len(ids))*prices["dashboard"].perMonth)
		default:
			if _, ok := freeAtRest[typ]; !ok {
				t.Errorf("resource type %s (%v) has no price and is not listed as free at rest (idleprices_test.go)", typ, ids)
			}
		}
	}
	lines = append(lines, scheduledRuns(t, s)...)
	return lines
}

// rateExpr is a schedule's rate expression.
var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// scheduledRuns prices what the shape's schedules run while idle: each
// run's request, its billed duration (sweepSeconds at the function's
// memory), its trace and its log lines; and the custom metrics the sweep
// emits on each (sweepMetrics).
func scheduledRuns(t *testing.T, s *shape) []idleLine {
	t.Helper()
	created := s.resources()
	var lines []idleLine
	for _, sch := range schedules(t, s) {
		fnID, f := sch.fn, created[sch.fn]
		runs := sch.runs
		mem, err := strconv.Atoi(scalar(get(f, "Properties", "MemorySize")))
		if err != nil {
			t.Fatalf("%s: MemorySize %q", fnID, scalar(get(f, "Properties", "MemorySize")))
		}
		// A run that wakes the paused database waits for its resume.
		seconds, waits := sweepSeconds, ""
		if wakesPausedDatabase(t, s, sch) {
			seconds, waits = sweepSeconds+resumeSeconds, ", each waiting for the database to resume"
		}
		gbs := runs * seconds * float64(mem) / 1024
		month := runs*prices["lambda request"].perMonth + gbs*prices["lambda arm64 GBs"].perMonth +
			runs*prices["xray trace"].perMonth + runs*sweepLogBytes/1e9*prices["log ingestion"].perMonth
		lines = append(lines, idleLine{
			fmt.Sprintf("%s: %s runs (%s)%s, their traces and logs", fnID, thousands(runs), sch.expr, waits),
			fmt.Sprintf("%s × ($0.20/10⁶ + %s s × %s GB × $%s + $5/10⁶ + %s B × $0.50/GB)", thousands(runs), num(seconds), num(float64(mem)/1024), num(prices["lambda arm64 GBs"].perMonth), thousands(sweepLogBytes)),
			month,
		})
		if fnID == "Sweep" {
			ms := sweepMetrics(t, s, f)
			lines = append(lines, idleLine{
				fmt.Sprintf("the sweep's %d custom %s (%s)", len(ms), plural(len(ms), "metric"), strings.Join(ms, ", ")),
				fmt.Sprintf("%d × $%.2f", len(ms), prices["custom metric"].perMonth),
				float64(len(ms)) * prices["custom metric"].perMonth,
			})
		}
	}
	return lines
}

// sweepMetrics returns the custom metrics a successful sweep emits
// (name, and its dimension's value): every m.Count(metrics.X, …) and
// m.Add(metrics.X, …) of internal/sweep but the failed run's, less
// those the function's METRICS leaves out.
func sweepMetrics(t *testing.T, s *shape, f *yaml.Node) []string {
	t.Helper()
	consts := goConsts(t, filepath.Join(root(t), "internal", "metrics"))
	only := map[string]bool{}
	if v := scalar(get(f, "Properties", "Environment", "Variables", "METRICS")); v != "" && v != "all" {
		for _, name := range strings.Split(v, ",") {
			only[strings.TrimSpace(name)] = true
		}
	}
	dir := filepath.Join(root(t), "internal", "sweep")
	seen := map[string]bool{}
	for _, file := range goFiles(t, dir) {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Count" && sel.Sel.Name != "Add") || len(call.Args) < 3 {
				return true
			}
			name, ok := call.Args[0].(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := name.X.(*ast.Ident); !ok || x.Name != "metrics" {
				return true
			}
			dims := call.Args[1]
			if sel.Sel.Name == "Add" {
				dims = call.Args[2]
			}
			metric := consts[name.Sel.Name]
			if metric == "" {
				t.Fatalf("metrics.%s: not a string constant of internal/metrics", name.Sel.Name)
			}
			key := metric
			if lit, ok := dims.(*ast.CompositeLit); ok {
				for _, el := range lit.Elts {
					if v, ok := el.(*ast.KeyValueExpr).Value.(*ast.SelectorExpr); ok {
						key += "{" + consts[v.Sel.Name] + "}"
					}
				}
			}
			if (len(only) == 0 || only[metric]) && !strings.HasSuffix(key, "{"+consts["OutcomeError"]+"}") {
				seen[key] = true
			}
			return true
		})
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}

// goFiles parses the Go files of dir, tests left out.
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	return files
}

// goConsts returns the string constants declared in dir, by name.
func goConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range goFiles(t, dir) {
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							out[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return out
}

// isTrue reports whether n is the boolean (or string) true.
func isTrue(n *yaml.Node) bool { return n != nil && n.Kind == yaml.ScalarNode && n.Value == "true" }

// num writes a price as it is, without an exponent.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// thousands writes a whole number with commas.
func thousands(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// idleTotal adds the lines up, each rounded to the cent as the table shows it.
func idleTotal(lines []idleLine) float64 {
	var total float64
	for _, l := range lines {
		total += math.Round(l.month*100) / 100
	}
	return math.Round(total*100) / 100
}

// idleTable writes a shape's lines as docs/capacity.md shows them.
func idleTable(lines []idleLine) string {
	var b strings.Builder
	b.WriteString("| | arithmetic | a month |\n|---|---|---|\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "| %s | %s | $%.2f |\n", l.what, l.arithmetic, math.Round(l.month*100)/100)
	}
	fmt.Fprintf(&b, "| **total** | | **$%.2f** |\n", idleTotal(lines))
	return b.String()
}

// idleDoc is where docs/capacity.md holds each shape's table, between
// <!-- idle NAME --> and <!-- /idle NAME -->.
func idleDocBlock(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)<!-- idle ` + name + ` -->\n(.*?)<!-- /idle ` + name + ` -->`)
}

// TestIdleCost: what each translated shape costs a month with no client
// calling, priced from idleprices_test.go; every resource type it
// creates is priced or listed as free at rest with its reason;
// docs/capacity.md shows each shape's table as computed here (set
// IDLE_WRITE=1 to write them there); and each default shape in
// idleGoals costs at most its goal.
func TestIdleCost(t *testing.T) {
	docPath := filepath.Join(root(t), "docs", "capacity.md")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	forEachShape(t, func(t *testing.T, s *shape) {
		name := strings.TrimPrefix(t.Name(), "TestIdleCost/")
		lines := idleCost(t, s)
		table := idleTable(lines)
		total := idleTotal(lines)
		t.Logf("%s idles at $%.2f a month:\n%s", name, total, table)
		block := idleDocBlock(name)
		m := block.FindStringSubmatch(text)
		switch {
		case os.Getenv("IDLE_WRITE") == "1" && m != nil:
			text = block.ReplaceAllLiteralString(text, "<!-- idle "+name+" -->\n"+table+"<!-- /idle "+name+" -->")
		case m == nil:
			t.Errorf("docs/capacity.md has no <!-- idle %s --> table", name)
		case m[1] != table:
			t.Errorf("docs/capacity.md's idle table of %s is not what the template costs; want\n%s", name, table)
		}
		if goal, ok := idleGoals[name]; ok && total > goal {
			t.Errorf("%s idles at $%.2f a month, over its goal of $%.2f", name, total, goal)
		}
	})
	if os.Getenv("IDLE_WRITE") == "1" && text != string(doc) {
		if err := os.WriteFile(docPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// auroraIdle prices an Aurora Serverless v2 cluster at a minimum of 0
// ACU while no client calls: its capacity while up (auroraAwake), its
// storage (auroraIdleGB), the I/O of each wake (auroraIOPerWake) and its
// RDS-managed secret.
func auroraIdle(t *testing.T, s *shape, id string) []idleLine {
	t.Helper()
	hours, wakes, how, ok := auroraAwake(t, s, id)
	if !ok {
		return nil
	}
	var lines []idleLine
	lines = append(lines, idleLine{
		fmt.Sprintf("Aurora Serverless v2 %s, up %s h a month (%s)", id, num(math.Round(hours*10)/10), strings.Join(how, "; ")),
		fmt.Sprintf("%s h × %g ACU × $%g/ACU-h", num(math.Round(hours*10)/10), auroraMinRunningACU, prices["aurora acu"].perHour),
		hours * auroraMinRunningACU * prices["aurora acu"].perHour,
	})
	lines = append(lines, idleLine{
		fmt.Sprintf("its storage, %g GB (assumed: an empty cluster; backups free up to it)", auroraIdleGB),
		fmt.Sprintf("%g × $%.2f", auroraIdleGB, prices["aurora storage"].perMonth),
		auroraIdleGB * prices["aurora storage"].perMonth,
	})
	if wakes > 0 {
		ios := wakes * auroraIOPerWake
		lines = append(lines, idleLine{
			fmt.Sprintf("its I/O, %s wakes × %s requests (assumed)", thousands(wakes), thousands(auroraIOPerWake)),
			fmt.Sprintf("%s × $0.20/10⁶", thousands(ios)),
			ios * prices["aurora io"].perMonth,
		})
	}
	if isTrue(get(get(s.resources()[id], "Properties"), "ManageMasterUserPassword")) {
		lines = append(lines, idleLine{"its RDS-managed secret", fmt.Sprintf("$%.2f", prices["secret"].perMonth), prices["secret"].perMonth})
	}
	return lines
}

// auroraAwake returns the hours a month an Aurora Serverless v2 cluster at
// a minimum of 0 ACU runs while no client calls, the wakes from a pause
// among them, and how: each scheduled run of the shape wakes it for its
// SecondsUntilAutoPause plus the run (the runs close their connections:
// app.CloseIdle), a schedule that comes back within that keeps it up all
// month, several are added as if they never overlapped (an upper bound),
// and an RDS Proxy's connections keep it up all month. ok is false (and
// the test failed) for a cluster that does not pause.
func auroraAwake(t *testing.T, s *shape, id string) (hours, wakes float64, how []string, ok bool) {
	t.Helper()
	created := s.resources()
	sc := get(created[id], "Properties", "ServerlessV2ScalingConfiguration")
	if sc == nil || scalar(get(sc, "MinCapacity")) != "0" {
		t.Errorf("%s: only Aurora Serverless v2 at a minimum of 0 ACU (it pauses) is priced", id)
		return 0, 0, nil, false
	}
	pause, err := strconv.Atoi(s.str(get(sc, "SecondsUntilAutoPause")))
	if err != nil {
		t.Fatalf("%s: SecondsUntilAutoPause: %v", id, err)
	}
	for _, tg := range s.ofType("AWS::RDS::DBProxyTargetGroup") {
		for _, c := range get(created[tg], "Properties", "DBClusterIdentifiers").Content {
			if ref(c) == id {
				return monthHours, 0, []string{"all month: the proxy's connections keep it from pausing"}, true
			}
		}
	}
	var seconds float64
	for _, sch := range schedules(t, s) {
		window := float64(pause) + sweepSeconds
		if sch.minutes*60 <= window {
			seconds += monthHours * 3600
			how = append(how, fmt.Sprintf("%s every %s min, within the %d s pause: never paused", sch.fn, num(sch.minutes), pause))
			continue
		}
		seconds += sch.runs * window
		wakes += sch.runs
		how = append(how, fmt.Sprintf("%s: %s wakes × %s s", sch.fn, thousands(sch.runs), num(window)))
	}
	return min(seconds, monthHours*3600) / 3600, wakes, how, true
}

// A schedule is one scheduled rule's target: the function it runs, how
// often, and its runs a month.
type schedule struct {
	rule, fn, expr string
	minutes, runs  float64
}

// schedules returns the shape's scheduled rules' targets (a rule on an
// event pattern runs only when a client's upload is scanned: none).
func schedules(t *testing.T, s *shape) []schedule {
	t.Helper()
	created := s.resources()
	var out []schedule
	rules := s.ofType("AWS::Events::Rule")
	slices.Sort(rules)
	for _, id := range rules {
		p := get(created[id], "Properties")
		if get(p, "ScheduleExpression") == nil && get(p, "EventPattern") != nil {
			continue
		}
		expr := s.str(get(p, "ScheduleExpression"))
		m := rateExpr.FindStringSubmatch(expr)
		if m == nil {
			t.Fatalf("%s: schedule %q: only rate(N unit) is priced", id, expr)
		}
		n, _ := strconv.Atoi(m[1])
		minutes := float64(n) * map[string]float64{"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[m[2]]
		for _, target := range get(p, "Targets").Content {
			fnID := strings.TrimSuffix(getAtt(get(target, "Arn")), ".Arn")
			if scalar(get(created[fnID], "Type")) != "AWS::Lambda::Function" {
				t.Fatalf("%s: target %s is not a function of this shape", id, fnID)
			}
			out = append(out, schedule{rule: id, fn: fnID, expr: expr, minutes: minutes, runs: monthHours * 60 / minutes})
		}
	}
	return out
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// wakesPausedDatabase reports whether each run of sch finds the shape's
// own database paused: an Aurora Serverless v2 cluster at 0 ACU, no RDS
// Proxy keeping it up, and the schedule slower than its pause.
func wakesPausedDatabase(t *testing.T, s *shape, sch schedule) bool {
	t.Helper()
	created := s.resources()
	if len(s.ofType("AWS::RDS::DBProxy")) > 0 {
		return false
	}
	for _, id := range s.ofType("AWS::RDS::DBCluster") {
		sc := get(created[id], "Properties", "ServerlessV2ScalingConfiguration")
		if sc == nil || scalar(get(sc, "MinCapacity")) != "0" {
			continue
		}
		pause, err := strconv.Atoi(s.str(get(sc, "SecondsUntilAutoPause")))
		if err != nil {
			t.Fatalf("%s: SecondsUntilAutoPause: %v", id, err)
		}
		return sch.minutes*60 > float64(pause)+sweepSeconds
	}
	return false
}
