package config

import (
	"fmt"
	"strings"
	"time"
)

// Malware scanning before delivery (docs/scanning.md).
const (
	// ScanOff: files are delivered as staged (the default).
	ScanOff = "off"
	// ScanGuardDuty: GuardDuty Malware Protection for S3 scans each
	// committed object; the scanresult function applies its results
	// (MalwareScanning=guardduty in template.yaml).
	ScanGuardDuty = "guardduty"
	// ScanClamAV: the dev server scans each committed object with clamd
	// (CLAMD_ADDRESS) and applies clamd's verdict as GuardDuty's event.
	ScanClamAV = "clamav"

	// DefaultScanTimeout is SCAN_TIMEOUT's default: GuardDuty documents
	// no bound on a scan's time, so the bound is ours.
	DefaultScanTimeout = 15 * time.Minute
	// DefaultClamdAddress is CLAMD_ADDRESS's default: make run's clamd.
	DefaultClamdAddress = "127.0.0.1:3310"
)

// Scan is how new files are scanned before delivery.
type Scan struct {
	// Mode (MALWARE_SCAN) is ScanOff, ScanGuardDuty or ScanClamAV. A
	// scanned mode needs CONTENT_BUCKET: the scanners read objects.
	Mode string
	// Undecided (SCAN_UNDECIDED) is "hold" (the default) or "deliver":
	// what a scan that could not decide, or never answered, does.
	Undecided string
	// Timeout (SCAN_TIMEOUT) is how long after staging a scan may take
	// before Undecided applies; it must stay under UPLOAD_TTL.
	Timeout time.Duration
	// ClamdAddress (CLAMD_ADDRESS) is clamd's TCP address, for ScanClamAV.
	ClamdAddress string
}

// On reports whether new files wait for a scan.
func (s Scan) On() bool { return s.Mode == ScanGuardDuty || s.Mode == ScanClamAV }

// readScan reads MALWARE_SCAN, SCAN_UNDECIDED, SCAN_TIMEOUT and
// CLAMD_ADDRESS; after readDurations (UPLOAD_TTL).
func (c *Config) readScan(getenv func(string) string, errs *errorList) {
	c.Scan.Mode = strings.TrimSpace(getenv("MALWARE_SCAN"))
	switch c.Scan.Mode {
	case "":
		c.Scan.Mode = ScanOff
	case ScanOff, ScanGuardDuty, ScanClamAV:
	default:
		errs.add(fmt.Errorf("MALWARE_SCAN: want off, guardduty or clamav, got %q", c.Scan.Mode))
	}
	if c.Scan.On() && c.ContentBucket == "" {
		errs.add(fmt.Errorf("MALWARE_SCAN: %s scans objects, and needs CONTENT_BUCKET", c.Scan.Mode))
	}
	c.Scan.Undecided = strings.TrimSpace(getenv("SCAN_UNDECIDED"))
	switch c.Scan.Undecided {
	case "":
		c.Scan.Undecided = "hold"
	case "hold", "deliver":
	default:
		errs.add(fmt.Errorf("SCAN_UNDECIDED: want hold or deliver, got %q", c.Scan.Undecided))
	}
	var err error
	c.Scan.Timeout, err = durationVar(getenv, "SCAN_TIMEOUT", DefaultScanTimeout)
	errs.add(err)
	if err == nil && (c.Scan.Timeout < time.Second || (c.UploadTTL > 0 && c.Scan.Timeout >= c.UploadTTL)) {
		errs.add(fmt.Errorf("SCAN_TIMEOUT: want 1s up to UPLOAD_TTL (%s), got %s", c.UploadTTL, c.Scan.Timeout))
	}
	c.Scan.ClamdAddress = strings.TrimSpace(getenv("CLAMD_ADDRESS"))
	if c.Scan.ClamdAddress == "" {
		c.Scan.ClamdAddress = DefaultClamdAddress
	}
}
