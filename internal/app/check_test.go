package app_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestCheckDatabase: a database that answers is nil; one that does not
// is an error naming DATABASE_URL, the server and the cause, without the
// password.
func TestCheckDatabase(t *testing.T) {
	check := func(url string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := app.New(ctx, config.Config{DatabaseURL: url}, app.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		return a.CheckDatabase(ctx)
	}
	good := pgtest.MustURL(t)
	if err := check(good); err != nil {
		t.Fatalf("a live database: got %v, want nil", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for name, c := range map[string]struct {
		url, want string
		is        error
	}{
		"Refused": {"postgres://u:s3cret-pw@" + addr + "/db?sslmode=disable&connect_timeout=5",
			"DATABASE_URL: database db on " + addr + ": connection refused", syscall.ECONNREFUSED},
		"NoSuchDatabase": {strings.Replace(good, "/"+pgtestDB(good)+"?", "/no_such_db?", 1),
			"no such database", nil},
	} {
		t.Run(name, func(t *testing.T) {
			err := check(c.url)
			var de *app.DatabaseError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a DatabaseError with %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("got %v, want it to wrap %v", err, c.is)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Errorf("the password is in %q", err)
			}
		})
	}
}

// pgtestDB is the database name in a pgtest URL.
func pgtestDB(url string) string {
	path := url[strings.LastIndex(url, "/")+1:]
	name, _, _ := strings.Cut(path, "?")
	return name
}
