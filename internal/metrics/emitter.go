package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// Unit is a CloudWatch metric unit.
type Unit string

// Units the service uses.
const (
	UnitCount   Unit = "Count"
	UnitBytes   Unit = "Bytes"
	UnitSeconds Unit = "Seconds"
)

// Emitter writes metrics to its writer in the Embedded Metric Format, one
// JSON object per line and per call. It is safe for concurrent use: each
// line is written with a single Write under a mutex.
//
// A nil *Emitter, or one with a nil writer, discards everything. Metrics are
// best-effort: a failed write, or a value JSON cannot hold (NaN, ±Inf), is
// dropped and never reported to the caller.
type Emitter struct {
	// Now is the clock that stamps each line. Default: time.Now.
	Now func() time.Time
	// Fields, when set, returns members added to every line, after the
	// caller's props (which win on a clash): on Lambda, the running
	// invocation's request ids (reqlog.Fields), so that a metric line joins
	// the log lines of its request.
	Fields func() map[string]any
	// Only, when not nil, is the set of metric names Add emits: a name not
	// in it writes nothing (the template's Monitoring=essential keeps the
	// custom metrics to those its alarms read). Default nil: every name.
	Only map[string]bool

	namespace string

	mu sync.Mutex // serializes writes to w
	w  io.Writer
}

// New returns an Emitter that writes lines to w (os.Stdout on Lambda) under
// the CloudWatch namespace (Namespace for this service).
func New(w io.Writer, namespace string) *Emitter {
	return &Emitter{Now: time.Now, namespace: namespace, w: w}
}

// Count emits value of the metric name in UnitCount. See Add.
func (e *Emitter) Count(name string, dims map[string]string, value float64, props map[string]any) {
	e.Add(name, UnitCount, dims, value, props)
}

// Add emits one line holding value of the metric name, in unit, under the
// dimension set made of dims' keys (sorted; none gives a metric without
// dimensions). props are written as extra members of the line, which
// CloudWatch Logs keeps for queries but does not turn into metrics.
//
// The line's top-level members share one space: a dimension named "_aws" or
// name is dropped, and so is a prop named "_aws", name, or a dimension key,
// or whose value does not marshal to JSON. A name that is empty or "_aws"
// emits nothing. unit should be one CloudWatch knows (UnitCount, UnitBytes).
func (e *Emitter) Add(name string, unit Unit, dims map[string]string, value float64, props map[string]any) {
	if e == nil || e.w == nil || name == "" || name == awsKey || math.IsNaN(value) || math.IsInf(value, 0) ||
		(e.Only != nil && !e.Only[name]) {
		return
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}

	keys := make([]string, 0, len(dims))
	for k := range dims {
		if k != awsKey && k != name {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)

	type metric struct {
		Name string `json:"Name"`
		Unit Unit   `json:"Unit"`
	}
	type directive struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []metric   `json:"Metrics"`
	}
	meta := struct {
		Timestamp         int64       `json:"Timestamp"`
		CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
	}{
		Timestamp: now().UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  e.namespace,
			Dimensions: [][]string{keys},
			Metrics:    []metric{{Name: name, Unit: unit}},
		}},
	}

	var buf bytes.Buffer
	buf.WriteByte('{')
	member(&buf, awsKey, meta)
	for _, k := range keys {
		buf.WriteByte(',')
		member(&buf, k, dims[k])
	}
	buf.WriteByte(',')
	member(&buf, name, value)
	e.writeProps(&buf, name, dims, props)
	buf.WriteString("}\n")

	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(buf.Bytes())
}

// writeProps writes props, and e.Fields' (props win), as members of the
// line after the metric, in key order: none that would shadow a
// dimension, the metadata or the metric itself, none that does not
// encode.
func (e *Emitter) writeProps(buf *bytes.Buffer, name string, dims map[string]string, props map[string]any) {
	if e.Fields != nil {
		if extra := e.Fields(); len(extra) > 0 {
			merged := make(map[string]any, len(props)+len(extra))
			for k, v := range extra {
				merged[k] = v
			}
			for k, v := range props {
				merged[k] = v
			}
			props = merged
		}
	}
	propKeys := make([]string, 0, len(props))
	for k := range props {
		if _, isDim := dims[k]; !isDim && k != awsKey && k != name {
			propKeys = append(propKeys, k)
		}
	}
	slices.Sort(propKeys)
	for _, k := range propKeys {
		v, err := json.Marshal(props[k])
		if err != nil {
			continue
		}
		buf.WriteByte(',')
		member(buf, k, json.RawMessage(v))
	}
}

// awsKey is the member of an EMF line that holds its metadata.
const awsKey = "_aws"

// member writes "key":value to buf. value is one whose encoding cannot fail
// (a string, a finite float64, the metadata, or an already valid
// json.RawMessage).
func member(buf *bytes.Buffer, key string, value any) {
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(value)
	buf.Write(k)
	buf.WriteByte(':')
	buf.Write(v)
}
