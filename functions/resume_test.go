package functions_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgpause"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestScheduledRunsWaitForAPausedDatabase: the scheduled runs are what
// wake the stack's own database from its pause (Aurora Serverless v2 at 0
// ACU resumes in about 15 s), so the sweep's binary and the scanresult
// binary's schedule (a Scheduled Event, events/sweep.json), started
// against a database that refuses connections when they are invoked and
// accepts them a few seconds later (internal/testkit/pgpause), wait for it
// and succeed: no failed invocation, so no ErrorsAlarm at every wake.
// Without the wait each run fails at its first connect. Likewise the
// migrate custom resource: a deploy after an idle spell finds the
// database paused, and must not fail (and roll back) for it.
func TestScheduledRunsWaitForAPausedDatabase(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.MustURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pause := pgpause.Start(t, u.Host)
	u.Host = pause.Addr
	paused := u.String()
	ep := s3test.MustStart(t)
	_, bucket := s3test.NewBucket(t, ep)
	for _, fn := range []struct{ name, dir string }{{"Sweep", "sweep"}, {"ScanresultSchedule", "scanresult"}} {
		t.Run(fn.name, func(t *testing.T) {
			rt := start(t, fn.dir, append(ep.Env(), "DATABASE_URL="+paused, "MALWARE_SCAN=guardduty", "CONTENT_BUCKET="+bucket)...)
			pause.PauseFor(3 * time.Second)
			refusedBefore := pause.Refused()
			ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
			defer cancel()
			res, err := rt.Invoke(ctx, readEvent(t, "sweep"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Err != nil {
				t.Fatalf("the run failed on the paused database: %v\n%s", res.Err, rt.Logs())
			}
			if pause.Refused() == refusedBefore {
				t.Fatal("the database refused no connection: the run did not meet the pause")
			}
			if !strings.Contains(rt.Logs(), "waiting for it") {
				t.Errorf("no log line says the run waited for the database:\n%s", rt.Logs())
			}
		})
	}
}

func TestMigrateWaitsForAPausedDatabase(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.MustURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pause := pgpause.Start(t, u.Host)
	u.Host = pause.Addr
	pause.PauseFor(3 * time.Second)
	resp := runMigrate(t, cfn.RequestUpdate, "DATABASE_URL="+u.String())
	if resp.Status != cfn.StatusSuccess {
		t.Fatalf("migrate on a paused database: %s (%s), want SUCCESS", resp.Status, resp.Reason)
	}
	if pause.Refused() == 0 {
		t.Fatal("the database refused no connection: migrate did not meet the pause")
	}
}

// TestAdminWaitsForAPausedDatabase: an operator's command (pendingctl
// token --stack invokes the admin function) may be what wakes the paused
// database; the admin binary, invoked while the database refuses
// connections for a few seconds, waits for it and creates the token,
// rather than failing the command.
func TestAdminWaitsForAPausedDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.MustURL(t))
	if err != nil {
		t.Fatal(err)
	}
	pause := pgpause.Start(t, u.Host)
	u.Host = pause.Addr
	rt := start(t, "admin", "DATABASE_URL="+u.String())
	pause.PauseFor(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
	defer cancel()
	res, err := rt.Invoke(ctx, readEvent(t, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || !strings.Contains(string(res.Payload), `"token":"pu_`) {
		t.Fatalf("create on a paused database: answer %s, error %v; want the token\n%s", res.Payload, res.Err, rt.Logs())
	}
	if pause.Refused() == 0 {
		t.Fatal("the database refused no connection: the command did not meet the pause")
	}
}
