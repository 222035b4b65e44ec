package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
)

// Exit codes.
const (
	exitOK      = 0 // done
	exitFailed  = 1 // something failed; the message says what
	exitUsage   = 2 // the command line is wrong
	exitNothing = 3 // nothing to do: ls found nothing, pull --once had nothing pending
)

const mainUsage = `pendingctl: the command-line tool of pendinguploads, a staging mailbox for
chat uploads bound for workspaces that cannot be called back (behind NAT).
The platform uploads files for a workspace; the workspace polls, downloads
and acknowledges them.

Usage:
  pendingctl <command> [flags] [arguments]
  pendingctl <command> --help      help on one command

For workspace owners and the platform (talk to the HTTP API):
  upload    stage files for a workspace
  ls        list a workspace's pending files
  pull      download pending files into a folder, verify them, ack them
  link      print a short-lived download link to a file (no token needed to open it)
  smoke     check a running API end to end: upload, list, fetch, ack

For operators (talk to the database; token also to a stack, --stack):
  migrate   apply or revert the schema, or show its version
  token     create, list or revoke workspace tokens
  sweep     delete acked and expired uploads now, once
  recount   recount the pending totals the quota reads (after a deploy, or drift)
  linkkey   rotate the key download links are signed with
  scans     list the files held for an operator by malware scanning; release
            or block one

  version   the version and commit of this pendingctl (also --version)

API commands read the server's URL from --api or PENDINGUPLOADS_API, and the
token from --token-file, --token or PENDINGUPLOADS_TOKEN (prefer the
environment or a file: a --token flag shows up in the process list). The
token is never printed. The workspace comes from --workspace or
PENDINGUPLOADS_WORKSPACE (for token create and revoke too). Database commands read DATABASE_URL (or
DB_SECRET_ARN), and CONTENT_BUCKET for sweep, like the service does;
make run prints the export lines of its own Postgres and workspace.

Exit codes:
  0  success
  1  failure (the message says what failed)
  2  usage error (a bad flag or argument, a missing setting such as
     DATABASE_URL or PENDINGUPLOADS_API, a FILE that does not exist)
  3  nothing to do (ls found no pending file, pull --once had nothing to pull)

Example, a workspace polling every 5 seconds into ~/inbox:
  export PENDINGUPLOADS_API=https://uploads.example.com
  export PENDINGUPLOADS_TOKEN=pu_…      # from: pendingctl token create
  pendingctl pull --workspace 6f1c…-… --dir ~/inbox --interval 5s
`

type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errReported is a failure already told to the user: exit 1, no message.
var errReported = errors.New("failed")

// errNothing is "nothing to do": exit 3.
var errNothing = errors.New("nothing to do")

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, e env, args []string) error
}

func commands() []command {
	return []command{
		{"upload", uploadUsage, runUpload},
		{"ls", lsUsage, runLs},
		{"pull", pullUsage, runPull},
		{"link", linkUsage, runLink},
		{"smoke", smokeUsage, runSmoke},
		{"migrate", migrateUsage, runMigrate},
		{"token", tokenUsage, runToken},
		{"sweep", sweepUsage, runSweep},
		{"recount", recountUsage, runRecount},
		{"linkkey", linkkeyUsage, runLinkkey},
		{"scans", scansUsage, runScans},
		{"version", versionUsage, runVersion},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := env{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	name := args[0]
	if name == "--version" || name == "-version" {
		name, args = "version", append([]string{"version"}, args[1:]...)
	}
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && name == "help" {
			for _, c := range commands() {
				if c.name == args[1] {
					fmt.Fprint(stdout, c.usage)
					return exitOK
				}
			}
			fmt.Fprintf(stderr, "pendingctl: no command %q\n", args[1])
			return exitUsage
		}
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, e, args[1:])
		var ue usageError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprint(stdout, c.usage)
			return exitOK
		case errors.Is(err, errNothing):
			return exitNothing
		case errors.Is(err, errReported):
			return exitFailed
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "pendingctl %s: %s\nRun 'pendingctl %s --help' for usage.\n", name, ue.msg, name)
			return exitUsage
		default:
			fmt.Fprintf(stderr, "pendingctl %s: %s\n", name, explain(err))
			return exitFailed
		}
	}
	fmt.Fprintf(stderr, "pendingctl: no command %q\nRun 'pendingctl --help' for the list.\n", name)
	return exitUsage
}

// explain turns an error into a message a person can act on.
func explain(err error) string {
	var ae *client.APIError
	switch {
	case client.IsUnauthorized(err) && errors.As(err, &ae):
		return fmt.Sprintf("the server refused the token (%d %s): it is unknown, revoked, or the token of another workspace. Check --workspace and the token (PENDINGUPLOADS_TOKEN).", ae.Status, ae.Message)
	case errors.Is(err, inbox.ErrLocked):
		return err.Error() + " (wait for it, or stop it)"
	case client.IsQuotaExceeded(err):
		return err.Error() + " (the workspace's mailbox is full: nothing was stored; its files must be pulled and acked, or expire, first)"
	case client.IsUnavailable(err):
		return err.Error() + " (the server or its storage is unavailable; retried, try again shortly)"
	case errors.Is(err, context.DeadlineExceeded):
		return err.Error() + " (raise --timeout?)"
	}
	return err.Error()
}

// newFlags returns a flag set that reports errors as usage errors and
// help as flag.ErrHelp.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses flags anywhere among args (flags after file names too;
// "--" ends the flags) and returns the other arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

// apiFlags are the flags of the commands that talk to the API.
type apiFlags struct {
	api, token, tokenFile, workspace string
	timeout                          time.Duration
	json, quiet                      bool
}

func (a *apiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.api, "api", "", "")
	fs.StringVar(&a.token, "token", "", "")
	fs.StringVar(&a.tokenFile, "token-file", "", "")
	fs.StringVar(&a.workspace, "workspace", "", "")
	fs.DurationVar(&a.timeout, "timeout", 10*time.Minute, "")
	fs.BoolVar(&a.json, "json", false, "")
	fs.BoolVar(&a.quiet, "quiet", false, "")
	fs.BoolVar(&a.quiet, "q", false, "")
}

// client builds the API client and parses the workspace.
func (a *apiFlags) client(e env) (*client.Client, uuid.UUID, error) {
	ws, err := parseWorkspace(a.workspace, e)
	if err != nil {
		return nil, uuid.Nil, err
	}
	api := a.api
	if api == "" {
		api = e.getenv("PENDINGUPLOADS_API")
	}
	if api == "" {
		return nil, uuid.Nil, usagef("no API URL: pass --api URL or set PENDINGUPLOADS_API")
	}
	tok := a.token
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return nil, uuid.Nil, fmt.Errorf("--token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok == "" {
		tok = e.getenv("PENDINGUPLOADS_TOKEN")
	}
	if strings.TrimSpace(tok) == "" {
		return nil, uuid.Nil, usagef("no token: set PENDINGUPLOADS_TOKEN, or pass --token-file FILE or --token TOKEN")
	}
	c, err := client.New(api, tok)
	if err != nil {
		return nil, uuid.Nil, usageError{err.Error()}
	}
	c.UserAgent = "pendingctl"
	if a.timeout <= 0 {
		return nil, uuid.Nil, usagef("--timeout must be positive")
	}
	return c, ws, nil
}

func parseWorkspace(s string, e env) (uuid.UUID, error) {
	if s == "" {
		s = e.getenv("PENDINGUPLOADS_WORKSPACE")
	}
	if s == "" {
		return uuid.Nil, usagef("--workspace is required (or set PENDINGUPLOADS_WORKSPACE)")
	}
	ws, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usagef("--workspace %q is not a UUID", s)
	}
	return ws, nil
}

// showBars says whether progress bars go to stderr.
func (a *apiFlags) showBars(e env) bool { return !a.quiet && isTerminal(e.stderr) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
