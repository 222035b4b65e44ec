package scanresult

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// GuardDuty's "GuardDuty Malware Protection Object Scan Result" event, its
// fields at each level, as GuardDuty documents them
// (https://docs.aws.amazon.com/guardduty/latest/ug/monitor-with-eventbridge-s3-malware-protection.html,
// "S3 object scan result"; docs/scanning.md says what of it this repository
// could read and where the rest comes from), and the scan status each
// result value maps to
// (https://docs.aws.amazon.com/guardduty/latest/ug/monitoring-malware-protection-s3-scans-gdu.html).
var (
	eventFields           = []string{"account", "detail", "detail-type", "id", "region", "resources", "source", "time", "version"}
	detailFields          = []string{"resourceType", "s3ObjectDetails", "scanResultDetails", "scanStatus", "schemaVersion"}
	objectFields          = []string{"bucketName", "eTag", "objectKey", "s3Throttled", "versionId"}
	resultFields          = []string{"scanResultStatus", "statusReasons", "threats"}
	scanStatusOfResult    = map[string]string{NoThreatsFound: "COMPLETED", ThreatsFound: "COMPLETED", Unsupported: "SKIPPED", AccessDenied: "SKIPPED", Failed: "FAILED"}
	planARN               = regexp.MustCompile(`^arn:aws:guardduty:[a-z0-9-]+:[0-9]{12}:malware-protection-plan/[A-Za-z0-9]+$`)
	sampleEventFileResult = map[string]string{
		"scanresult-no-threats-found.json": NoThreatsFound,
		"scanresult-threats-found.json":    ThreatsFound,
		"scanresult-unsupported.json":      Unsupported,
		"scanresult-access-denied.json":    AccessDenied,
		"scanresult-failed.json":           Failed,
	}
)

// guardDutyShape returns what in raw, one scan result event, differs from
// GuardDuty's documented event: a field missing or not GuardDuty's at any
// level, a source or detail-type not its, a scanStatus that is not its
// result value's, threats present but for THREATS_FOUND (or absent for it),
// statusReasons neither null nor a list of strings. With strictPlan, the
// event's resources are one plan ARN as AWS writes it.
func guardDutyShape(t *testing.T, raw []byte, strictPlan bool) (result string, problems []string) {
	t.Helper()
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ev); err != nil {
		return "", []string{"not a JSON object: " + err.Error()}
	}
	fields := func(level string, m map[string]json.RawMessage, want []string) {
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			problems = append(problems, level+": fields "+fmtList(got)+", want GuardDuty's "+fmtList(want))
		}
	}
	object := func(level string, raw json.RawMessage) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			problems = append(problems, level+": not an object")
		}
		return m
	}
	fields("event", ev, eventFields)
	var source, detailType string
	_ = json.Unmarshal(ev["source"], &source)
	_ = json.Unmarshal(ev["detail-type"], &detailType)
	if source != Source || detailType != DetailType {
		problems = append(problems, "source "+source+", detail-type "+detailType)
	}
	var resources []string
	if err := json.Unmarshal(ev["resources"], &resources); err != nil || len(resources) != 1 || (strictPlan && !planARN.MatchString(resources[0])) {
		problems = append(problems, "resources: want the plan's ARN, one: "+string(ev["resources"]))
	}
	detail := object("detail", ev["detail"])
	fields("detail", detail, detailFields)
	fields("detail.s3ObjectDetails", object("detail.s3ObjectDetails", detail["s3ObjectDetails"]), objectFields)
	rd := object("detail.scanResultDetails", detail["scanResultDetails"])
	fields("detail.scanResultDetails", rd, resultFields)
	var scanStatus, resourceType string
	_ = json.Unmarshal(detail["scanStatus"], &scanStatus)
	_ = json.Unmarshal(detail["resourceType"], &resourceType)
	_ = json.Unmarshal(rd["scanResultStatus"], &result)
	if want, ok := scanStatusOfResult[result]; !ok || scanStatus != want || resourceType != "S3_OBJECT" {
		problems = append(problems, "scanStatus "+scanStatus+", resourceType "+resourceType+" for result "+result)
	}
	var threats []Threat
	if err := json.Unmarshal(rd["threats"], &threats); err != nil || (result == ThreatsFound) != (threats != nil) ||
		slices.ContainsFunc(threats, func(th Threat) bool { return th.Name == "" }) {
		problems = append(problems, "threats: want named threats for THREATS_FOUND alone, else null: "+string(rd["threats"]))
	}
	var reasons []string
	if err := json.Unmarshal(rd["statusReasons"], &reasons); err != nil {
		problems = append(problems, "statusReasons: want null or a list of strings: "+string(rd["statusReasons"]))
	}
	return result, problems
}

func fmtList(s []string) string { b, _ := json.Marshal(s); return string(b) }

// TestSampleEventsHaveGuardDutysFields holds the repository's sample scan
// results (events/scanresult-*.json, which the functions' tests and sam
// local invoke feed to the Scanresult function) and the events the dev
// server's clamd stand-in builds (eventJSON) to GuardDuty's documented
// event, field by field at every level: one sample per result value of
// GuardDuty's list, none left out, none extra.
func TestSampleEventsHaveGuardDutysFields(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "events", "scanresult-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			result, problems := guardDutyShape(t, raw, true)
			for _, p := range problems {
				t.Error(p)
			}
			if want, ok := sampleEventFileResult[name]; !ok || result != want {
				t.Errorf("%s holds result %q: want %q", name, result, want)
			}
			seen[result] = true
		})
	}
	for _, r := range slices.Sorted(maps.Keys(scanStatusOfResult)) {
		if !seen[r] {
			t.Errorf("no sample event of %s (events/scanresult-*.json)", r)
		}
	}

	t.Run("Standin", func(t *testing.T) {
		for _, tc := range []struct{ status, result string }{{"COMPLETED", NoThreatsFound}, {"COMPLETED", ThreatsFound}, {"FAILED", Failed}} {
			d := Detail{SchemaVersion: "1.0", ResourceType: "S3_OBJECT", ScanStatus: tc.status}
			d.S3ObjectDetails.BucketName, d.S3ObjectDetails.ObjectKey = "bucket", "objects/w/f"
			d.ScanResultDetails.ScanResultStatus = tc.result
			if tc.result == ThreatsFound {
				d.ScanResultDetails.Threats = []Threat{{Name: "Eicar-Signature"}}
			}
			raw, err := eventJSON(d)
			if err != nil {
				t.Fatal(err)
			}
			if _, problems := guardDutyShape(t, raw, false); len(problems) > 0 {
				t.Errorf("the stand-in's %s event: %q", tc.result, problems)
			}
		}
	})
}
