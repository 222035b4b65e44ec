package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/awsprofile"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/sweep"
	"github.com/pendinguploads/pendinguploads/migrations"
)

const dbEnvUsage = `Environment:
  DATABASE_URL       the Postgres URL (or DB_SECRET_ARN: a Secrets Manager
                     secret in the RDS JSON shape); make run prints the
                     export DATABASE_URL=… line of its own Postgres
`

const migrateUsage = `Usage: pendingctl migrate up|down|version [flags]

Apply or revert the database schema (the migrations built into this binary).

  up        apply every pending migration (safe to run twice, and from
            several machines at once: it takes a lock)
  down      revert migrations: every one, which DROPS ALL UPLOADS AND TOKENS,
            or the last N with --steps N; needs --yes
  version   print the applied version, and whether a migration failed half
            way ("dirty")

Flags:
  --steps N          down: revert only the last N migrations
  --yes              down: confirm
  --json             version: print {"version","dirty","latest"}
  --timeout D        give up after D (default 5m)

` + dbEnvUsage + `
Exit codes: 0 done, 1 failure, 2 usage error.
`

const tokenUsage = `Usage:
  pendingctl token create --workspace W [--json] [--stack S | --function F]
  pendingctl token list [--workspace W] [--json] [--stack S | --function F]
  pendingctl token revoke --workspace W ID|PREFIX|TOKEN [--stack S | --function F]

Manage workspace tokens: a workspace token lets its workspace (and only it)
list, download and ack its uploads, and upload to it.

  create    make a token for W and print it, once, on stdout: the database
            keeps only its SHA-256, so it cannot be shown again. Hand it to
            the workspace (PENDINGUPLOADS_TOKEN).
  list      list tokens (W's, or every workspace's), newest first: ID,
            PREFIX (the token's first characters), dates. Never the token.
  revoke    revoke W's live tokens matching an ID or a PREFIX from 'list',
            or the token itself.

Without --stack or --function the command talks to the database
(DATABASE_URL). With either, it asks the deployed stack's admin function
instead, with your AWS credentials (environment, profile, SSO: the AWS
SDK's usual chain, AWS_REGION or the profile's region): no tunnel to the
database is needed, only lambda:InvokeFunction on the function (and
cloudformation:DescribeStacks on the stack, for --stack).

Flags:
  --workspace W      the workspace's UUID (create, revoke: default
                     $PENDINGUPLOADS_WORKSPACE; list: every workspace's
                     tokens without the flag, whatever the variable says)
  --json             print JSON (create: {"token","id","prefix",
                     "workspace_id","created_at"}; list: an array;
                     revoke: {"revoked":n})
  --limit N          list: at most N tokens, 1 to 1000 (default 100)
  --stack S          ask the admin function of CloudFormation stack S (its
                     output AdminFunctionName)
  --function F       ask the admin function F (a name or an ARN)
  --timeout D        give up after D (default 1m)

` + dbEnvUsage + `  AWS_ENDPOINT_URL_LAMBDA, AWS_ENDPOINT_URL_CLOUDFORMATION
                     with --function, --stack: other endpoints for Lambda
                     and CloudFormation (the AWS SDK's own settings)

Exit codes: 0 done, 1 failure (revoke: no live token matched), 2 usage error.

Example:
  export PENDINGUPLOADS_TOKEN=$(pendingctl token create --stack pendinguploads --workspace 6f1c2d3e-0000-4000-8000-000000000001)
`

const sweepUsage = `Usage: pendingctl sweep [flags]

Run one sweep now, as the 5-minute schedule does: delete acked uploads older
than the ack retention and unacked uploads past their expiry (rows and
bucket objects), and print the counts.

Flags:
  --ack-retention D  keep acked uploads this long (default: $ACK_RETENTION, 1h)
  --json             print {"acked":n,"expired":m,"orphans":k} ("unfinished":true when cut short)
  --timeout D        give up after D (default 5m)

` + dbEnvUsage + `  CONTENT_BUCKET     the bucket, so that its objects go too (with the
                     usual AWS credentials; S3_ENDPOINT for a local S3)

Exit codes: 0 done (even if nothing was due), 1 failure, 2 usage error.
`

// noDatabase is the usage error of a database command without a
// database.
const noDatabase = "no database: set DATABASE_URL (make run prints an export DATABASE_URL=… line for its own Postgres), DB_SECRET_ARN or DB_IAM_USER"

// openApp builds the service's pieces from the environment, for the
// database commands: the pool, the store (with its bucket) and the
// resolved database URL; and checks that the database answers, so that a
// URL pointing at nothing is named as such.
func openApp(ctx context.Context, e env) (*app.App, error) {
	if strings.TrimSpace(e.getenv("DATABASE_URL")) == "" && strings.TrimSpace(e.getenv("DB_SECRET_ARN")) == "" &&
		strings.TrimSpace(e.getenv("DB_IAM_USER")) == "" {
		return nil, usageError{noDatabase}
	}
	cfg, err := config.Load(e.getenv, config.NeedDatabase)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, app.Options{Logger: log, MaxConns: 2, OpenBucket: s3blobs.OpenBucket, LoadAWS: awsprofile.Load})
	if err != nil {
		return nil, err
	}
	if err := a.CheckDatabase(ctx); err != nil {
		a.Close()
		if errors.Is(err, syscall.ECONNREFUSED) && cfg.DatabaseURL != "" {
			return nil, fmt.Errorf("%w (make run's own Postgres: is make run still running? copy the export DATABASE_URL=… line it printed)", err)
		}
		return nil, err
	}
	return a, nil
}

// openAppWithin is openApp for a command bounded by timeout: the app, the
// command's context (its deadline timeout from now), and done, which
// closes the app and releases the context.
func openAppWithin(ctx context.Context, e env, timeout time.Duration) (*app.App, context.Context, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	a, err := openApp(ctx, e)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return a, ctx, func() { a.Close(); cancel() }, nil
}

func runMigrate(ctx context.Context, e env, args []string) error {
	fs := newFlags("migrate")
	steps := fs.Int("steps", 0, "")
	yes := fs.Bool("yes", false, "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 5*time.Minute, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("want one of up, down, version")
	}
	op := rest[0]
	switch op {
	case "up", "version":
	case "down":
		if !*yes {
			return usagef("down reverts the schema (without --steps: drops every upload and token); add --yes to confirm")
		}
		if *steps < 0 {
			return usagef("--steps must be positive")
		}
	default:
		return usagef("unknown migrate command %q: want up, down or version", op)
	}
	a, ctx, done, err := openAppWithin(ctx, e, *timeout)
	if err != nil {
		return err
	}
	defer done()
	switch op {
	case "up":
		if err := migrations.Up(ctx, a.DatabaseURL, migrations.WithBeforeConnect(a.BeforeConnect)); err != nil {
			return err
		}
	case "down":
		if *steps > 0 {
			err = migrations.Steps(ctx, a.DatabaseURL, -*steps, migrations.WithBeforeConnect(a.BeforeConnect))
		} else {
			err = migrations.Down(ctx, a.DatabaseURL, migrations.WithBeforeConnect(a.BeforeConnect))
		}
		if err != nil {
			return err
		}
	}
	v, dirty, err := migrations.Version(ctx, a.DatabaseURL, migrations.WithBeforeConnect(a.BeforeConnect))
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"version": v, "dirty": dirty, "latest": migrations.Latest})
	}
	switch op {
	case "version":
		fmt.Fprintf(e.stdout, "%d\n", v)
		if dirty {
			fmt.Fprintln(e.stderr, "dirty: a migration failed half way; fix the database, then force the version")
		}
		if v < migrations.Latest {
			fmt.Fprintf(e.stderr, "behind: this build's latest is %d; run 'pendingctl migrate up'\n", migrations.Latest)
		}
	default:
		fmt.Fprintf(e.stdout, "schema at version %d\n", v)
	}
	if dirty {
		return errors.New("the schema is dirty")
	}
	return nil
}

func runToken(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return usagef("want one of create, list, revoke")
	}
	sub, args := args[0], args[1:]
	if sub == "-h" || sub == "--help" || sub == "-help" || sub == "help" {
		return flag.ErrHelp
	}
	cmd, err := parseTokenCommand(e, sub, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cmd.timeout)
	defer cancel()
	var svc tokenService
	if cmd.function != "" || cmd.stack != "" {
		svc, err = functionTokens(ctx, e, cmd.function, cmd.stack)
	} else {
		var close func()
		svc, close, err = databaseTokens(ctx, e)
		if err == nil {
			defer close()
		}
	}
	if err != nil {
		return err
	}
	ans, err := svc(ctx, cmd.req)
	if err != nil {
		return err
	}
	return cmd.print(e, ans)
}

// tokenCommand is one token command, parsed: the request for the admin
// service and how to reach it and print its answer.
type tokenCommand struct {
	sub             string
	ws              uuid.UUID
	req             admin.Request
	asJSON          bool
	timeout         time.Duration
	function, stack string
}

// parseTokenCommand reads the flags and arguments of token sub.
func parseTokenCommand(e env, sub string, args []string) (tokenCommand, error) {
	fs := newFlags("token " + sub)
	wsFlag := fs.String("workspace", "", "")
	asJSON := fs.Bool("json", false, "")
	limit := fs.Int("limit", admin.DefaultLimit, "")
	timeout := fs.Duration("timeout", time.Minute, "")
	function := fs.String("function", "", "")
	stack := fs.String("stack", "", "")
	rest, err := parse(fs, args)
	if err != nil {
		return tokenCommand{}, err
	}
	c := tokenCommand{sub: sub, asJSON: *asJSON, timeout: *timeout, function: *function, stack: *stack}
	switch sub {
	case "create", "revoke":
		if c.ws, err = parseWorkspace(*wsFlag, e); err != nil {
			return c, err
		}
	case "list":
		if *wsFlag != "" {
			if c.ws, err = parseWorkspace(*wsFlag, e); err != nil {
				return c, err
			}
		}
		if *limit < 1 || *limit > admin.MaxLimit {
			return c, usagef("--limit must be 1 to %d", admin.MaxLimit)
		}
	default:
		return c, usagef("unknown token command %q: want create, list or revoke", sub)
	}
	if sub == "revoke" && len(rest) != 1 {
		return c, usagef("revoke wants one ID, PREFIX or TOKEN")
	}
	if sub != "revoke" && len(rest) > 0 {
		return c, usagef("unexpected argument %q", rest[0])
	}
	if c.function != "" && c.stack != "" {
		return c, usagef("--function and --stack both name the admin function: pass one")
	}
	c.req = admin.Request{Action: sub}
	if sub != "list" || *wsFlag != "" { // list without --workspace: every workspace's
		c.req.Workspace = c.ws.String()
	}
	switch sub {
	case "list":
		c.req.Limit = *limit
	case "revoke":
		c.req.Match = rest[0]
	}
	return c, nil
}

// print writes the answer of the command (a refusal is its error).
func (c tokenCommand) print(e env, ans admin.Answer) error {
	if ans.Error != nil {
		if ans.Error.Code == admin.CodeNotFound {
			return fmt.Errorf("no live token of workspace %s matches (see 'pendingctl token list --workspace %s')", c.ws, c.ws)
		}
		return fmt.Errorf("refused (%s): %s", ans.Error.Code, ans.Error.Message)
	}
	switch {
	case c.sub == "create" && ans.Create != nil:
		cr := ans.Create
		if c.asJSON {
			return writeJSON(e.stdout, cr)
		}
		fmt.Fprintln(e.stdout, cr.Token)
		fmt.Fprintf(e.stderr, "token %s (%s…) for workspace %s: shown once, store it now.\n", cr.ID, cr.Prefix, cr.WorkspaceID)
		return nil
	case c.sub == "list" && ans.List != nil:
		return printTokens(e.stdout, c.asJSON, ans.List.Tokens)
	case c.sub == "revoke" && ans.Revoke != nil:
		if c.asJSON {
			return writeJSON(e.stdout, ans.Revoke)
		}
		fmt.Fprintf(e.stdout, "revoked %d token(s)\n", ans.Revoke.Revoked)
		return nil
	}
	return fmt.Errorf("%s: the answer is not a %s answer", c.sub, c.sub)
}

func printTokens(w io.Writer, asJSON bool, ts []admin.Token) error {
	if asJSON {
		if ts == nil {
			ts = []admin.Token{}
		}
		return writeJSON(w, ts)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tWORKSPACE\tCREATED\tLAST_USED\tREVOKED")
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04")
	}
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\n", t.ID, t.Prefix, t.WorkspaceID, when(&t.CreatedAt), when(t.LastUsedAt), when(t.RevokedAt))
	}
	return tw.Flush()
}

func runSweep(ctx context.Context, e env, args []string) error {
	fs := newFlags("sweep")
	retention := fs.String("ack-retention", "", "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 5*time.Minute, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	getenv := e.getenv
	if *retention != "" {
		if _, err := time.ParseDuration(*retention); err != nil {
			return usagef("--ack-retention %q: want a duration such as 1h or 30m", *retention)
		}
		getenv = func(k string) string {
			if k == "ACK_RETENTION" {
				return *retention
			}
			return e.getenv(k)
		}
	}
	a, ctx, done, err := openAppWithin(ctx, env{getenv: getenv, stdout: e.stdout, stderr: e.stderr}, *timeout)
	if err != nil {
		return err
	}
	defer done()
	res, err := sweep.Run(ctx, a.Store, a.Config.AckRetention, a.Logger, nil)
	if *asJSON {
		if werr := writeJSON(e.stdout, res); werr != nil && err == nil {
			err = werr
		}
	} else {
		fmt.Fprintf(e.stdout, "swept: %d acked, %d expired", res.Acked, res.Expired)
		if res.Orphans > 0 {
			fmt.Fprintf(e.stdout, ", %d orphan objects", res.Orphans)
		}
		fmt.Fprintln(e.stdout)
	}
	return err
}

const recountUsage = `Usage: pendingctl recount (--workspace W | --all) [flags]

Recount the running total of pending files and bytes that the upload quota
reads (pending_upload_totals) from the rows themselves: for one workspace,
or for every workspace with pending files or a total. Run it after a
deploy that adds the totals (docs/deploy.md), and whenever something other
than this service writes, acks or deletes the rows of pending files (on the
platform's database, the platform's own code): the total then drifts
(docs/operating.md). Safe while the service runs: each workspace is
recounted in a transaction of its own, under its total's row lock.

Flags:
  --workspace W      the workspace (default: $PENDINGUPLOADS_WORKSPACE)
  --all              every workspace, one at a time
  --json             print {"workspaces":n,"repaired":m} ("unfinished":true when cut short)
  --timeout D        give up after D (default 5m); a new run starts over

` + dbEnvUsage + `
Exit codes: 0 done, 1 failure, 2 usage error.
`

func runRecount(ctx context.Context, e env, args []string) error {
	fs := newFlags("recount")
	wsFlag := fs.String("workspace", "", "")
	all := fs.Bool("all", false, "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 5*time.Minute, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	var ws uuid.UUID
	if *all && *wsFlag != "" {
		return usagef("--workspace and --all exclude each other")
	}
	if !*all {
		if ws, err = parseWorkspace(*wsFlag, e); err != nil {
			return err
		}
	}
	a, ctx, done, err := openAppWithin(ctx, e, *timeout)
	if err != nil {
		return err
	}
	defer done()
	if *all {
		res, err := a.Store.RecountAll(ctx)
		if *asJSON {
			if werr := writeJSON(e.stdout, res); werr != nil && err == nil {
				err = werr
			}
		} else {
			fmt.Fprintf(e.stdout, "recounted %d workspaces, %d totals repaired", res.Workspaces, res.Repaired)
			if res.Unfinished {
				fmt.Fprint(e.stdout, " (cut short by --timeout: run again)")
			}
			fmt.Fprintln(e.stdout)
		}
		return err
	}
	was, now, err := a.Store.Recount(ctx, ws)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"workspace": ws, "was": was, "now": now})
	}
	fmt.Fprintf(e.stdout, "workspace %s: %d files, %d bytes pending (the total said %d files, %d bytes)\n",
		ws, now.Files, now.Bytes, was.Files, was.Bytes)
	return nil
}
