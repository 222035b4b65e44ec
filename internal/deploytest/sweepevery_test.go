package deploytest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// onSweepSchedule reports whether n is !FindInMap [SweepSchedules,
// !Ref SweepEvery, key]: the value SweepEvery picks.
func onSweepSchedule(n *yaml.Node, key string) bool {
	name, args := fn(n)
	return name == "Fn::FindInMap" && len(args) == 3 && scalar(args[0]) == "SweepSchedules" &&
		ref(args[1]) == "SweepEvery" && scalar(args[2]) == key
}

// TestSweepEvery: for each SweepEvery, the translated template (with
// scanning, so that both schedules are there) runs the sweep and the
// overdue scans on the one schedule it names, and BacklogAgeAlarm's
// period is twice that schedule, one period evaluated, missing data
// breaching: a missed run alarms, the quiet between two runs does not.
// The default's schedule lets the stack's own database pause between
// two runs.
func TestSweepEvery(t *testing.T) {
	tpl := loadTemplate(t)
	values := seq(get(tpl.doc, "Parameters", "SweepEvery", "AllowedValues"))
	if len(values) == 0 {
		t.Fatal("Parameters.SweepEvery: no AllowedValues")
	}
	shapes := map[string]map[string]string{}
	for _, v := range values {
		shapes[v] = map[string]string{"SweepEvery": v, "MalwareScanning": "guardduty"}
		shapes[v+"/sweep alone"] = map[string]string{"SweepEvery": v}
	}
	docs, skip, err := translate(root(t), shapes)
	if skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(skip)
		}
		t.Skip(skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	def := scalar(get(tpl.doc, "Parameters", "SweepEvery", "Default"))
	var rows strings.Builder
	for _, v := range values {
		t.Run(v, func(t *testing.T) {
			s := newShape(t, template{doc: docs[v]}, shapes[v])
			scheds := schedules(t, s)
			fns := map[string]bool{}
			var minutes float64
			for _, sch := range scheds {
				fns[sch.fn] = true
				if minutes != 0 && sch.minutes != minutes {
					t.Errorf("%s runs %s, another schedule every %g minutes: want one schedule", sch.fn, sch.expr, minutes)
				}
				minutes = sch.minutes
			}
			if !fns["Sweep"] || !fns["Scanresult"] || len(scheds) != 2 {
				t.Fatalf("schedules %v: want the sweep's and the overdue scans'", scheds)
			}
			alarm := s.resources()["BacklogAgeAlarm"]
			p := get(alarm, "Properties")
			period, err := strconv.Atoi(s.str(get(p, "Period")))
			if err != nil {
				t.Fatalf("BacklogAgeAlarm: Period: %v", err)
			}
			if want := int(2 * minutes * 60); period != want {
				t.Errorf("BacklogAgeAlarm: Period %d s, want %d (twice the sweep's %g minutes)", period, want, minutes)
			}
			if got := scalar(get(p, "EvaluationPeriods")); got != "1" {
				t.Errorf("BacklogAgeAlarm: EvaluationPeriods %s, want 1", got)
			}
			if got := scalar(get(p, "TreatMissingData")); got != "breaching" {
				t.Errorf("BacklogAgeAlarm: TreatMissingData %s, want breaching (a sweep that stopped)", got)
			}
			if v == def {
				pause, _ := strconv.Atoi(s.params["DatabaseSecondsUntilAutoPause"][0])
				if minutes*60 <= float64(pause)+sweepSeconds {
					t.Errorf("the default SweepEvery %s runs within the database's %d s pause: it never pauses", v, pause)
				}
			}
		})
		// The sweep alone, from zero: docs/capacity.md's row for v.
		s := newShape(t, template{doc: docs[v+"/sweep alone"]}, shapes[v+"/sweep alone"])
		hours, wakes, _, _ := auroraAwake(t, s, "DatabaseCluster")
		name := "`" + v + "`"
		if v == def {
			name += " (default)"
		}
		fmt.Fprintf(&rows, "| %s | %s | %s h | $%.2f | $%.2f |\n", name, thousands(wakes), num(math.Round(hours*10)/10),
			hours*auroraMinRunningACU*prices["aurora acu"].perHour, wakes*auroraIOPerWake*prices["aurora io"].perMonth)
	}
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), rows.String()) {
		t.Errorf("docs/capacity.md's table of the database's idle price by SweepEvery is not what the template costs; want its rows\n%s", rows.String())
	}
}
