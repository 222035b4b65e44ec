// Package humanize writes quantities for people: the Go client's errors
// say sizes as pendingctl's lines and progress bars do. The server module
// keeps the same function for pendingctl in internal/humanize (it cannot
// import this module's internal packages); its test holds the two to one
// source.
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
