package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/locals3"
)

// bigFileBytes is the size of the large file the banner's presign lines
// stage (at most the per-file cap): well over the request cap, so that it
// can only go through the bucket.
const bigFileBytes = 20 << 20

// banner is what the dev server prints once it listens.
type banner struct {
	base           string
	adminToken     string
	adminGenerated bool // the dev server supplies it (kept in LOCAL_DIR)
	ws             uuid.UUID
	wsToken        string
	cfg            config.Config
	started
	page examples
}

func printBanner(w io.Writer, b banner) {
	var s strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&s, format, args...) }
	b.header(p)
	if b.ws == uuid.Nil {
		p(`
This database holds the platform's workspaces, and the dev server does not
add one to them. Restart with DEV_WORKSPACE_ID set to one of them
(SELECT id FROM workspaces) to get a workspace token and curl lines; the
admin token above works for every workspace meanwhile, and the platform's
own workspace tokens work as they are.
`)
		p("\nThe sweep runs now and every %s. Ctrl-C stops everything.\n", SweepInterval)
		_, _ = io.WriteString(w, s.String())
		return
	}
	p("  workspace        %s\n", b.ws)
	p("  workspace token  %s   (new for this run; earlier ones still work)\n", b.wsToken)
	b.restart(p)
	b.curlLines(p)
	b.pageLines(p)
	b.pendingctlLines(p)
	p("\nThe sweep runs now and every %s. Ctrl-C stops %s.\n", SweepInterval, b.stops())
	_, _ = io.WriteString(w, s.String())
}

// printf is how the banner's parts write.
type printf func(format string, args ...any)

// header is the banner's first lines: where, what storage, the admin
// token and where it came from.
func (b banner) header(p printf) {
	storage := "bytes in Postgres"
	if b.cfg.ContentBucket != "" {
		storage = "large files in s3://" + b.cfg.ContentBucket
		if b.localS3 {
			storage += ", on a local S3 at " + b.s3URL
		}
	}
	origin := "from ADMIN_TOKEN"
	switch {
	case b.adminGenerated && b.adminKept:
		origin = "the same as the last run's, kept in " + b.rel(adminTokenFile) + "; ADMIN_TOKEN sets another"
	case b.adminGenerated:
		origin = "generated, and kept in " + b.rel(adminTokenFile) + " for the next runs; ADMIN_TOKEN sets another"
	case b.adminToken == "":
		origin = "from ADMIN_TOKEN_SECRET_ARN"
	}
	p("\npendinguploads dev server on %s (%s)\n\n", b.base, storage)
	if b.adminToken != "" {
		p("  admin token      %s   (%s)\n", b.adminToken, origin)
	}
}

// restart says what a restart found of the earlier runs.
func (b banner) restart(p printf) {
	if !b.reused {
		return
	}
	e := b.earlier
	p("\nA restart: found the data of earlier runs in %s: %s waiting in %s, %s.\n",
		filepath.Join(b.localDir, "pg"), plural(e.files, "file", "files"), plural(e.workspaces, "workspace", "workspaces"),
		plural(e.tokens, "live workspace token", "live workspace tokens"))
	p("The tokens printed before still work, the admin token too, and so do download links; the workspace is the last run's.\n")
	if e.lostBytes > 0 {
		p("Of those, %d had their bytes in the last run's local S3, which keeps nothing across runs:\n"+
			"expired now; the sweep removes them.\n", e.lostBytes)
	}
}

// curlLines are the curl lines: stage (and, with a bucket, presign, PUT
// and commit) as the platform, then list, content and ack as the
// workspace.
func (b banner) curlLines(p printf) {
	auth := func(tok string) string { return "-H 'Authorization: Bearer " + tok + "'" }
	wsPath := b.base + "/workspaces/" + b.ws.String()
	p("\nStage a file (as the platform, with the admin token):\n")
	p("  curl -sS -F files=@README.md %s %s/chat/uploads\n", auth(b.adminToken), wsPath)
	if b.cfg.ContentBucket != "" {
		size := min(int64(bigFileBytes), b.cfg.MaxFileBytes)
		p("\nStage a large file through the bucket, as the canvas does (presign, PUT it straight to S3, commit):\n")
		p("  head -c %d /dev/urandom > big.bin\n", size)
		// The API's JSON writes & as \u0026: sed gives the URL back as a
		// shell takes it.
		p(`  curl -sS %s -H 'Content-Type: application/json' -d '{"files":[{"name":"big.bin","size":%d,"mimeType":"application/octet-stream"}]}' %s/chat/uploads/presign | sed 's/\\u0026/\&/g'`+"\n",
			auth(b.adminToken), size, wsPath)
		p("  curl -sS -X PUT -H 'Content-Type: application/octet-stream' -T big.bin '<url>'\n")
		p(`  curl -sS %s -H 'Content-Type: application/json' -d '{"files":[{"upload_id":"<upload_id>"}]}' %s/chat/uploads`+"\n",
			auth(b.adminToken), wsPath)
		p("  (<url> and <upload_id> from presign's answer)\n")
	}
	p("\nThen, as the workspace:\n")
	p("  curl -sS %s %s/pending-uploads\n", auth(b.wsToken), wsPath)
	p("  %s\n", contentLine(auth(b.wsToken), wsPath+"/pending-uploads/<file_id>/content"))
	p("  curl -sS -X POST %s %s/pending-uploads/<file_id>/ack\n", auth(b.wsToken), wsPath)
}

// pageLines are the example page's URL and what its CORS needs.
func (b banner) pageLines(p printf) {
	if b.page.ln == nil {
		return
	}
	p("\nThe browser client in a page (%s: upload, list, download, ack), as the workspace:\n", examplePage)
	p("  %s/%s#api=%s&workspace=%s&token=%s\n", b.page.origin, examplePage, b.base, b.ws, b.wsToken)
	switch {
	case b.page.corsSupplied:
		p("  (CORS_ALLOWED_ORIGINS=%s for it, set by the dev server as you set none", b.page.origin)
	case b.page.corsListed:
		p("  (your CORS_ALLOWED_ORIGINS lists its origin, %s", b.page.origin)
	default:
		p("  (it needs CORS_ALLOWED_ORIGINS to list %s: add it, or unset CORS_ALLOWED_ORIGINS", b.page.origin)
	}
	switch {
	case b.cfg.ContentBucket == "":
		p("; files above %d MiB need a bucket: make run-s3)\n", b.cfg.MaxRequestBytes>>20)
	case b.localS3:
		p("; the local bucket's CORS rule too)\n")
	default:
		p("; the bucket's CORS rule must allow it to PUT)\n")
	}
}

// pendingctlLines are the export lines pendingctl needs in another shell.
func (b banner) pendingctlLines(p printf) {
	p("\npendingctl, in another shell (%s):\n", pendingctlBuildLine)
	if b.ownDB != "" {
		p("  export DATABASE_URL='%s'\n", b.ownDB)
	}
	if b.localS3 {
		p("  export CONTENT_BUCKET=%s S3_ENDPOINT=%s S3_FORCE_PATH_STYLE=true AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=%s\n",
			b.cfg.ContentBucket, b.s3URL, locals3.AccessKeyID, locals3.SecretAccessKey, locals3.Region)
	}
	p("  export PENDINGUPLOADS_API=%s PENDINGUPLOADS_WORKSPACE=%s PENDINGUPLOADS_TOKEN=%s\n", b.base, b.ws, b.wsToken)
	dbNote := "with the DATABASE_URL above"
	if b.ownDB == "" {
		dbNote = "with your DATABASE_URL"
	}
	p("  ./pendingctl token create        # the operator's commands (token, migrate, sweep), %s\n", dbNote)
	p("  ./pendingctl pull --dir inbox    # the workspace's: fetch, verify, store, ack\n")
}

// stops names what Ctrl-C stops.
func (b banner) stops() string {
	switch {
	case b.ownDB == "" && !b.localS3:
		return "the server"
	case b.ownDB == "":
		return "the server and its local S3"
	case b.localS3:
		return "the server, its Postgres and its local S3"
	}
	return "the server and the Postgres it started"
}

// rel names a file in LOCAL_DIR as the person gave the folder, relative
// when it is under the working directory.
func (b banner) rel(name string) string {
	path := filepath.Join(b.localDir, name)
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return path
}
