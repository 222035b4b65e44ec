// Package metrics emits CloudWatch metrics in the Embedded Metric Format
// (EMF): one JSON object per line on a writer, which on Lambda is stdout.
// CloudWatch Logs reads the lines and extracts the metrics from them, so no
// API call and no client are needed.
//
// An Emitter is safe for concurrent use, and a nil *Emitter discards
// everything, so code that runs without metrics calls it all the same.
package metrics
