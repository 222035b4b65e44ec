package deploytest

import (
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
)

// TestMonitoringFitsTheFreeTier: at Monitoring=essential (the default)
// every shape has at most CloudWatch's free 10 alarms, 3 dashboards and
// 10 custom metrics (METRICS names them; each alarm on the service's own
// namespace reads one of them); at Monitoring=full it has every alarm
// (the throttles' too), the dashboard and every metric.
func TestMonitoringFitsTheFreeTier(t *testing.T) {
	tpl := loadTemplate(t)
	if got := scalar(get(tpl.doc, "Parameters", "Monitoring", "Default")); got != "essential" {
		t.Errorf("Monitoring's default is %q, want essential", got)
	}
	// Scanned: MalwareScanning=guardduty adds its alarms (3 with full; at
	// essential ScanresultErrorsAlarm alone, in ApiLatencyAlarm's place).
	// Push (on in each) adds PushrelayLagAlarm with full.
	fullAlarms := map[string]int{"FromZero": 17, "BesideThePlatform": 17, "Scanned": 20}
	for name, params := range map[string]map[string]string{"FromZero": {}, "BesideThePlatform": besideThePlatform,
		"Scanned": {"MalwareScanning": "guardduty"}} {
		for _, mode := range []string{"essential", "full"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				s := newShape(t, tpl, with(params, "Monitoring", mode))
				s.checkRefs()
				alarms, dashboards := s.ofType("AWS::CloudWatch::Alarm"), s.ofType("AWS::CloudWatch::Dashboard")
				emitted := map[string]bool{}
				v := scalar(s.resolve(get(s.tpl.doc, "Globals", "Function", "Environment", "Variables", "METRICS")))
				if v != "all" {
					for _, m := range strings.Split(v, ",") {
						emitted[m] = true
					}
				}
				if mode == "essential" {
					if len(alarms) > 10 || len(dashboards) > 3 || len(emitted) == 0 || len(emitted) > 10 {
						t.Errorf("%d alarms, %d dashboards, METRICS %q: want at most 10, 3 and 10", len(alarms), len(dashboards), v)
					}
				} else if len(emitted) != 0 || len(dashboards) != 1 || len(alarms) != fullAlarms[name] {
					t.Errorf("%d alarms, %d dashboards, METRICS %q: want %d, 1 and all", len(alarms), len(dashboards), v, fullAlarms[name])
				}
				created := s.resources()
				for _, id := range alarms {
					p := get(created[id], "Properties")
					if scalar(get(p, "Namespace")) != metrics.Namespace {
						continue
					}
					if m := scalar(get(p, "MetricName")); len(emitted) > 0 && !emitted[m] {
						t.Errorf("%s reads %s, which METRICS %q leaves out", id, m, v)
					}
				}
			})
		}
	}
}
