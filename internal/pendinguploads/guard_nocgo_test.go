//go:build !cgo

package pendinguploads

import "testing"

// TestGuardNeedsCgo stands, in a build without cgo, for the tests that
// read the package's statements with Postgres's own parser (pg_query_go,
// which is C): TestEveryStatementNamesCallerMayAct and
// TestNoStatementOnFilesElsewhere. Without cgo they cannot run, and a
// guard that quietly did not run would pass; so this fails instead. (The
// cross-builds vet this package for darwin, where cgo is off.)
func TestGuardNeedsCgo(t *testing.T) {
	t.Fatal("the SQL guard's tests need cgo (Postgres's parser, pg_query_go): run them with CGO_ENABLED=1 and a C compiler")
}
