// Package humanize writes quantities for people: pendingctl's lines and
// progress bars. The Go client says sizes the same way in its errors with
// its own copy, client/internal/humanize, in the client module (which
// cannot import the server's packages, as the server cannot import the
// client's internal ones); TestSameAsClient holds the two to one source,
// and the client module's test checks the values.
package humanize

import "fmt"

// Bytes formats n as B, KiB, MiB or GiB, one decimal above B ("4.0 MiB").
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
