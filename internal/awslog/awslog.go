// Package awslog sends the AWS SDK's log lines through slog, as JSON.
package awslog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
)

// SDKLogger returns a logger for the AWS SDK (a smithy-go logging.Logger)
// that writes through log, so that the SDK's lines are JSON like every
// other line of the service, not the SDK's default plain text on stderr.
// The SDK's WARN lines go at slog.LevelWarn; everything else it says
// (DEBUG) at slog.LevelDebug, below what the service's handlers keep.
// A nil log means slog.Default().
func SDKLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		l := log
		if l == nil {
			l = slog.Default()
		}
		level := slog.LevelDebug
		if c == logging.Warn {
			level = slog.LevelWarn
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		l.Log(ctx, level, fmt.Sprintf(format, v...), "source", "aws-sdk")
	})
}
