// Package schemaresource is the CloudFormation custom resource
// (Custom::Migrate) behind the migrate function: Create and Update apply
// the migrations built into the binary, Delete leaves the schema (and its
// data) in place. It answers CloudFormation on every request, whatever
// failed: a custom resource that never answers holds a deploy, a rollback
// or a stack delete until its ServiceTimeout.
package schemaresource

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/cfnresource"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// PhysicalID stays the same across updates: CloudFormation would read a
// new one as a replacement and delete the old.
const PhysicalID = "pendinguploads-schema"

// Resource handles the custom resource's requests. Build it with New.
type Resource struct {
	databaseURL string
	connect     migrations.Option // the app's BeforeConnect (an IAM token)
	app         *app.App          // for its wait for a paused database; nil when not set up
	initErr     error
	log         *slog.Logger
}

// New returns the resource over a, the function's app, or, when the
// function could not be set up (a is nil), over initErr: Create and
// Update then fail with it as their reason, and Delete still succeeds.
func New(a *app.App, initErr error) *Resource {
	r := &Resource{initErr: initErr, log: slog.Default()}
	if a != nil {
		r.databaseURL, r.log, r.app = a.DatabaseURL, a.Logger, a
		r.connect = migrations.WithBeforeConnect(a.BeforeConnect)
	}
	if r.databaseURL == "" && r.initErr == nil {
		r.initErr = errors.New("no database URL")
	}
	return r
}

// Handle is a cfn.CustomResourceFunction (for cfn.LambdaWrap, which PUTs
// the answer to the request's ResponseURL). Delete always succeeds and
// touches nothing. Create and Update migrate to migrations.Latest and
// return its version as Data.Version; they fail with the setup's error,
// or the migration's, as the reason.
func (r *Resource) Handle(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	ctx, end := reqlog.Begin(ctx, "")
	defer end()
	if ev.RequestType == cfn.RequestDelete {
		r.log.InfoContext(ctx, "stack delete: schema left in place")
		return PhysicalID, nil, nil
	}
	if r.initErr != nil {
		r.log.ErrorContext(ctx, "migrate cannot start", "err", r.initErr.Error(), "request_type", ev.RequestType)
		return PhysicalID, nil, cfnresource.Reason("migrate cannot start: %v", r.initErr)
	}
	ctx, cancel := lambdafn.WithMargin(ctx)
	defer cancel()
	// A deploy after an idle spell finds the stack's own database paused:
	// wait for its resume rather than fail the deploy (app.WaitForDatabase).
	if r.app != nil {
		_ = r.app.WaitForDatabase(ctx, lambdafn.DatabaseWait) // on failure, Up fails on the same error
		defer r.app.CloseIdle(ctx)
	}
	if err := migrations.Up(ctx, r.databaseURL, r.connect); err != nil {
		r.log.ErrorContext(ctx, "migrate failed", "err", err.Error(), "request_type", ev.RequestType)
		return PhysicalID, nil, cfnresource.Reason("%v", err)
	}
	v, _, err := migrations.Version(ctx, r.databaseURL, r.connect)
	if err != nil {
		return PhysicalID, nil, cfnresource.Reason("%v", err)
	}
	r.log.InfoContext(ctx, "migrated", "version", v, "request_type", ev.RequestType)
	return PhysicalID, map[string]any{"Version": v}, nil
}
