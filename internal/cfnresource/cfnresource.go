// Package cfnresource is what the CloudFormation custom resources
// (internal/schemaresource, internal/iotendpoint) share: the reason of a
// FAILED answer, bounded to what CloudFormation takes.
package cfnresource

import (
	"errors"
	"fmt"
	"strings"
)

// MaxReason bounds the Reason sent to CloudFormation, whose whole answer
// must stay under 4 KiB; a longer one is cut, the log keeps it whole.
const MaxReason = 1024

// Reason formats a failure's reason for CloudFormation, at most MaxReason
// bytes (cut on a UTF-8 boundary, ending in "…").
func Reason(format string, args ...any) error {
	s := fmt.Sprintf(format, args...)
	if len(s) > MaxReason {
		s = strings.ToValidUTF8(s[:MaxReason-len("…")], "") + "…"
	}
	return errors.New(s)
}
