package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/locals3"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
)

// listen listens on host:port, or says which setting to change.
func listen(host, port string) (net.Listener, error) {
	addr := net.JoinHostPort(host, port)
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	next := "8081"
	if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65535 {
		next = strconv.Itoa(n + 1)
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, startErrorf("PORT", "port %s is taken by another program (a second make run?): stop it, or choose another port: PORT=%s make run", port, next)
	case errors.Is(err, syscall.EACCES):
		return nil, startErrorf("PORT", "port %s needs privileges: choose one above 1023: PORT=8080 make run", port)
	}
	return nil, startErrorf("PORT", "cannot listen on %s (HOST %q, PORT %q): %v", addr, host, port, err)
}

// checkDatabase pings the database, and names the setting and the fix
// when it does not answer. own: the dev server's own Postgres, which
// answered a moment ago.
func checkDatabase(ctx context.Context, a *app.App, own bool) error {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := a.CheckDatabase(cctx)
	var de *app.DatabaseError
	switch {
	case err == nil:
		return nil
	case own || !errors.As(err, &de):
		return err
	}
	fix := "start that server or correct the URL; or unset DATABASE_URL, and make run starts a Postgres of its own"
	if de.Setting == "DB_SECRET_ARN" {
		fix = "check the secret's host, port, dbname and password"
	}
	return startErrorf(de.Setting, "database %s on %s: %s: %s", de.Database, de.Addr, de.Reason, fix)
}

// prepareBucket makes the bucket when the dev server runs its own S3
// (LOCAL_S3), as the template does; otherwise it checks that the bucket
// is there and reachable, and names the setting and the fix when not.
func prepareBucket(ctx context.Context, cfg config.Config, loadAWS func(context.Context, *slog.Logger) (aws.Config, error), log *slog.Logger, local bool) error {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	awsCfg, err := loadAWS(cctx, log)
	if err != nil {
		return startErrorf("CONTENT_BUCKET", "needs AWS credentials and a region: %v", err)
	}
	client := s3blobs.NewClient(awsCfg, cfg.S3Endpoint, cfg.S3ForcePathStyle)
	if local {
		if err := locals3.CreateBucket(cctx, client, cfg.ContentBucket, locals3.BucketOrigins(cfg.CORSAllowedOrigins, cfg.PublicOrigin)); err != nil {
			return startErrorf("LOCAL_S3", "%v", err)
		}
		return nil
	}
	err = s3blobs.CheckBucket(cctx, client, cfg.ContentBucket)
	where := "in AWS (region " + awsCfg.Region + ")"
	if cfg.S3Endpoint != "" {
		where = "at S3_ENDPOINT " + cfg.S3Endpoint
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, s3blobs.ErrNoSuchBucket):
		create := fmt.Sprintf("aws s3 mb s3://%s", cfg.ContentBucket)
		if cfg.S3Endpoint != "" {
			create = fmt.Sprintf("aws --endpoint-url %s s3 mb s3://%s", cfg.S3Endpoint, cfg.ContentBucket)
		}
		return startErrorf("CONTENT_BUCKET", "there is no bucket %q %s: create it (%s; the template's lifecycle and CORS rules are in template.yaml), "+
			"or let the dev server start a local S3 with the bucket made: make run-s3", cfg.ContentBucket, where, create)
	case errors.Is(err, s3blobs.ErrUnreachable) && cfg.S3Endpoint != "":
		return startErrorf("S3_ENDPOINT", "nothing answers at %s (for CONTENT_BUCKET %s): start the S3 server there (moto_server, MinIO) or correct S3_ENDPOINT; "+
			"or unset S3_ENDPOINT and let the dev server start a local S3: make run-s3", cfg.S3Endpoint, cfg.ContentBucket)
	case errors.Is(err, s3blobs.ErrUnreachable):
		return startErrorf("CONTENT_BUCKET", "S3 does not answer %s: check the network and AWS_REGION; for a local S3, make run-s3", where)
	case errors.Is(err, s3blobs.ErrAccessDenied):
		return startErrorf("CONTENT_BUCKET", "access to bucket %q %s is denied: check the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket's policy",
			cfg.ContentBucket, where)
	}
	return startErrorf("CONTENT_BUCKET", "bucket %q %s: %v", cfg.ContentBucket, where, err)
}
