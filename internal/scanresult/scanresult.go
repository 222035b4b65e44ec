// Package scanresult decides a file's fate from its malware scan: the
// "GuardDuty Malware Protection Object Scan Result" event that GuardDuty
// Malware Protection for S3 publishes to EventBridge once it has scanned
// an object (the scanresult function), and, on the dev server, clamd's
// verdict turned into that same event (Clamd), through the same Handler.
//
// The event, as GuardDuty documents it
// (https://docs.aws.amazon.com/guardduty/latest/ug/monitor-with-eventbridge-s3-malware-protection.html):
// source "aws.guardduty", detail-type "GuardDuty Malware Protection Object
// Scan Result", resources [the plan's ARN], and a detail with
// schemaVersion, scanStatus (COMPLETED, SKIPPED, FAILED), resourceType
// "S3_OBJECT", s3ObjectDetails (bucketName, objectKey, eTag, versionId,
// s3Throttled) and scanResultDetails (scanResultStatus, threats: [{name}]
// or null, statusReasons: a list or null): the field set
// TestSampleEventsHaveGuardDutysFields holds the repository's sample
// events (in events/) and the stand-in's events to. The result values are GuardDuty's
// list (https://docs.aws.amazon.com/guardduty/latest/ug/monitoring-malware-protection-s3-scans-gdu.html):
// NO_THREATS_FOUND, THREATS_FOUND, UNSUPPORTED, ACCESS_DENIED, FAILED.
// What each does is Verdict's table.
package scanresult

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// The event's source and detail-type, as the EventBridge rule matches
// them; ScheduledEvent, the detail-type of the function's schedule.
const (
	Source         = "aws.guardduty"
	DetailType     = "GuardDuty Malware Protection Object Scan Result"
	ScheduledEvent = "Scheduled Event"
)

// GuardDuty's scan result values (scanResultDetails.scanResultStatus),
// and TIMEOUT, ours: no result within SCAN_TIMEOUT.
const (
	NoThreatsFound = "NO_THREATS_FOUND"
	ThreatsFound   = "THREATS_FOUND"
	Unsupported    = "UNSUPPORTED"
	AccessDenied   = "ACCESS_DENIED"
	Failed         = "FAILED"
	Timeout        = "TIMEOUT"
)

// Detail is the event's detail, the fields read.
type Detail struct {
	SchemaVersion   string `json:"schemaVersion"`
	ScanStatus      string `json:"scanStatus"`
	ResourceType    string `json:"resourceType"`
	S3ObjectDetails struct {
		BucketName  string `json:"bucketName"`
		ObjectKey   string `json:"objectKey"`
		ETag        string `json:"eTag"`
		VersionID   string `json:"versionId"`
		S3Throttled bool   `json:"s3Throttled"`
	} `json:"s3ObjectDetails"`
	ScanResultDetails struct {
		ScanResultStatus string `json:"scanResultStatus"`
		// Threats is null but for THREATS_FOUND.
		Threats []Threat `json:"threats"`
		// StatusReasons say why a scan was skipped or failed (null when
		// it completed): kept in the file's record, for the operator who
		// decides a held file.
		StatusReasons []string `json:"statusReasons"`
	} `json:"scanResultDetails"`
}

// Threat is one threat a scan named.
type Threat struct {
	Name string `json:"name"`
}

// Policy is what happens to a file whose scan could not decide
// (UNSUPPORTED, ACCESS_DENIED, FAILED) or never answered (TIMEOUT):
// SCAN_UNDECIDED.
type Policy string

const (
	// PolicyHold holds the file for an operator (the default).
	PolicyHold Policy = "hold"
	// PolicyDeliver delivers it unscanned.
	PolicyDeliver Policy = "deliver"
)

// ParsePolicy reads SCAN_UNDECIDED's value; "" is PolicyHold.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "", PolicyHold:
		return PolicyHold, nil
	case PolicyDeliver:
		return PolicyDeliver, nil
	}
	return "", fmt.Errorf("%q is not hold or deliver", s)
}

// Verdict is what result does to its file under policy p:
//
//	NO_THREATS_FOUND                     deliver
//	THREATS_FOUND                        block (bytes deleted, never delivered)
//	UNSUPPORTED, ACCESS_DENIED, FAILED,
//	TIMEOUT                              the policy: hold (default) or deliver
//	anything else (a value GuardDuty
//	adds later)                          hold, whatever the policy
func (p Policy) Verdict(result string) pendinguploads.Verdict {
	switch result {
	case NoThreatsFound:
		return pendinguploads.Deliver
	case ThreatsFound:
		return pendinguploads.Block
	case Unsupported, AccessDenied, Failed, Timeout:
		if p == PolicyDeliver {
			return pendinguploads.Deliver
		}
		return pendinguploads.Hold
	}
	return pendinguploads.Hold
}

// Decider is what the Handler needs of the store (pendinguploads.Store).
type Decider interface {
	Decide(ctx context.Context, key string, v pendinguploads.Verdict, result, reason string) (pendinguploads.ScanDecision, error)
	DecideOverdue(ctx context.Context, timeout time.Duration, v pendinguploads.Verdict) ([]pendinguploads.Overdue, error)
}

var _ Decider = (*pendinguploads.Store)(nil)

// Handler applies scan results to files. Its fields are set before first
// use; it is then safe for concurrent use.
type Handler struct {
	Store Decider
	// Bucket is the bucket whose objects are ours: a result for any other
	// is ignored.
	Bucket string
	// Policy decides undecidable results (default PolicyHold).
	Policy Policy
	// Timeout is SCAN_TIMEOUT: a file whose scan has not answered this
	// long after staging gets the policy (Overdue). 0 turns it off.
	Timeout time.Duration
	Log     *slog.Logger
	Metrics *metrics.Emitter
}

// New returns the Handler of store over cfg's bucket, SCAN_UNDECIDED
// and SCAN_TIMEOUT (config.Load checked them).
func New(store Decider, cfg config.Config, log *slog.Logger, m *metrics.Emitter) *Handler {
	return &Handler{Store: store, Bucket: cfg.ContentBucket, Policy: Policy(cfg.Scan.Undecided),
		Timeout: cfg.Scan.Timeout, Log: log, Metrics: m}
}

// Handle applies one EventBridge event. An event that is not a scan
// result of an object of ours in Bucket is logged and ignored; a
// repeated or late one changes nothing (pendinguploads.Store.Decide).
// It returns an error only when the store failed, so that the
// invocation fails and EventBridge's retry delivers the event again.
func (h *Handler) Handle(ctx context.Context, ev events.EventBridgeEvent) error {
	if ev.Source != Source || ev.DetailType != DetailType {
		h.Log.Warn("scan result ignored", "reason", "not a GuardDuty object scan result", "source", ev.Source, "detail_type", ev.DetailType)
		return nil
	}
	var d Detail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		h.Log.Warn("scan result ignored", "reason", "unreadable detail", "err", err)
		return nil
	}
	return h.Apply(ctx, d)
}

// Apply applies one scan result's detail (Handle's, or the local
// stand-in's).
func (h *Handler) Apply(ctx context.Context, d Detail) error {
	obj := d.S3ObjectDetails
	if obj.BucketName != h.Bucket {
		h.Log.Warn("scan result ignored", "reason", "another bucket", "bucket", obj.BucketName)
		return nil
	}
	result := d.ScanResultDetails.ScanResultStatus
	if result == "" {
		// GuardDuty sets a result for each scanStatus; none is taken
		// as a failed scan.
		result = Failed
	}
	names := make([]string, 0, len(d.ScanResultDetails.Threats))
	for _, t := range d.ScanResultDetails.Threats {
		names = append(names, t.Name)
	}
	// The record's reason: the threats a scan named, else why it could
	// not decide (Decide bounds it).
	reason := strings.Join(names, "; ")
	if reason == "" {
		reason = strings.Join(d.ScanResultDetails.StatusReasons, "; ")
	}
	v := h.Policy.Verdict(result)
	dec, err := h.Store.Decide(ctx, obj.ObjectKey, v, result, reason)
	if err != nil {
		h.Log.Error("scan result not applied", "key", obj.ObjectKey, "result", result, "err", err)
		return err
	}
	h.report(dec, v, result, names)
	return nil
}

// Overdue gives the policy to every file whose scan has not answered
// within Timeout (the function's schedule, the dev server's timer).
func (h *Handler) Overdue(ctx context.Context) error {
	if h.Timeout <= 0 {
		return nil
	}
	v := h.Policy.Verdict(Timeout)
	over, err := h.Store.DecideOverdue(ctx, h.Timeout, v)
	state := pendinguploads.ScanHeld
	if v == pendinguploads.Deliver {
		state = pendinguploads.ScanClean
	}
	for _, o := range over {
		h.report(pendinguploads.ScanDecision{WorkspaceID: o.WorkspaceID, FileID: o.FileID, Filename: o.Filename,
			Changed: true, State: state}, v, Timeout, nil)
	}
	if err != nil {
		h.Log.Error("overdue scans not decided", "err", err)
	}
	return err
}

// report logs what a result did and counts it: the workspace and file
// named, never the bytes.
func (h *Handler) report(d pendinguploads.ScanDecision, v pendinguploads.Verdict, result string, threats []string) {
	attrs := []any{"workspace_id", d.WorkspaceID, "file_id", d.FileID, "result", result, "verdict", v.String(),
		"state", string(d.State), "changed", d.Changed}
	switch {
	case d.State == "":
		h.Log.Info("scan result for no file of ours", append(attrs, "note", "swept, expired or never ours")...)
	case !d.Changed:
		h.Log.Info("scan result changed nothing", attrs...)
	case d.State == pendinguploads.ScanBlocked:
		h.Metrics.Count(metrics.ScanBlocked, nil, 1, nil)
		h.Log.Error("malware blocked", append(attrs, "filename", d.Filename, "threats", threats)...)
	case d.State == pendinguploads.ScanHeld:
		h.Metrics.Count(metrics.ScanHeld, nil, 1, nil)
		h.Log.Warn("file held for an operator", append(attrs, "filename", d.Filename)...)
	case d.State == pendinguploads.ScanClean:
		h.Metrics.Count(metrics.ScanClean, nil, 1, nil)
		h.Log.Info("file delivered after its scan", attrs...)
	}
}
