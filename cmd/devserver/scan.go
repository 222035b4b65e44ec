package main

import (
	"context"
	"fmt"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/scanresult"
)

// startClamd starts a clamd of the dev server's own, with the
// repository's signatures (docs/scanning.md), when MALWARE_SCAN is clamav
// and CLAMD_ADDRESS is unset, and sets CLAMD_ADDRESS to it, as it starts
// Postgres.
func (d *devRun) startClamd(ctx context.Context) error {
	if d.lookup("MALWARE_SCAN") != config.ScanClamAV || d.lookup("CLAMD_ADDRESS") != "" {
		return nil
	}
	c, err := scanresult.StartClamd(ctx, d.st.localDir)
	if err != nil {
		return startErrorf("MALWARE_SCAN", "%v", err)
	}
	d.onStop(c.Stop)
	d.env["CLAMD_ADDRESS"] = c.Addr
	fmt.Fprintf(d.stdout, "clamd (malware scanning, the repository's signatures): %s\n", c.Addr)
	return nil
}

// scanLoop plays GuardDuty with clamd (MALWARE_SCAN=clamav) until ctx
// ends: each waiting object scanned, its verdict applied by the code the
// Scanresult function runs; it stops before the service closes. Nothing
// for any other MALWARE_SCAN.
func (d *devRun) scanLoop(ctx context.Context, a *app.App, cfg config.Config) error {
	if cfg.Scan.Mode != config.ScanClamAV {
		return nil
	}
	awsCfg, err := d.loadAWS(ctx, d.log)
	if err != nil {
		return startErrorf("MALWARE_SCAN", "the bucket's AWS configuration: %v", err)
	}
	bucket, err := s3blobs.NewFromAWS(awsCfg, cfg.ContentBucket, cfg.S3Endpoint, cfg.S3ForcePathStyle)
	if err != nil {
		return startErrorf("MALWARE_SCAN", "the bucket: %v", err)
	}
	if err := scanresult.Ping(ctx, cfg.Scan.ClamdAddress); err != nil {
		return startErrorf("CLAMD_ADDRESS", "clamd at %s does not answer: %v", cfg.Scan.ClamdAddress, err)
	}
	s := &scanresult.Standin{Store: a.Store, Bucket: bucket, Tagger: bucket, Handler: scanresult.New(a.Store, cfg, d.log, a.Metrics),
		Addr: cfg.Scan.ClamdAddress, Log: d.log}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(sctx) }()
	d.onStop(func() { cancel(); <-done })
	return nil
}
