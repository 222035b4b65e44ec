// Package humanize writes quantities for people: the Go client's errors
// and pendingctl's lines and progress bars say a size the same way, from
// this one function (pendingctl, in the server module, imports it).
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
