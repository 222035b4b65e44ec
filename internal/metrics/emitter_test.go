package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var fixedNow = time.Date(2026, 5, 4, 12, 30, 0, 123_000_000, time.UTC)

// newTestEmitter returns an Emitter writing to the returned buffer, with its
// clock fixed at fixedNow.
func newTestEmitter(tb testing.TB) (*Emitter, *bytes.Buffer) {
	tb.Helper()
	var buf bytes.Buffer
	e := New(&buf, Namespace)
	e.Now = func() time.Time { return fixedNow }
	return e, &buf
}

// decodeLines decodes each line of out as one JSON object.
func decodeLines(tb testing.TB, out string) []map[string]any {
	tb.Helper()
	if !strings.HasSuffix(out, "\n") {
		tb.Fatalf("output %q does not end in a newline", out)
	}
	var docs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			tb.Fatalf("line %q: %v", line, err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// emf builds the decoded form of the _aws member for one metric.
func emf(name, unit string, dimKeys ...string) map[string]any {
	keys := make([]any, 0, len(dimKeys))
	for _, k := range dimKeys {
		keys = append(keys, k)
	}
	return map[string]any{
		"Timestamp": float64(fixedNow.UnixMilli()),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": []any{keys},
			"Metrics":    []any{map[string]any{"Name": name, "Unit": unit}},
		}},
	}
}

func TestEmitter(t *testing.T) {
	tests := []struct {
		name string
		emit func(e *Emitter)
		want map[string]any
	}{
		{"SweptWithOutcome", func(e *Emitter) {
			e.Count(Swept, map[string]string{Outcome: OutcomeExpired}, 7, nil)
		}, map[string]any{
			"_aws":  emf(Swept, "Count", Outcome),
			Outcome: OutcomeExpired,
			Swept:   float64(7),
		}},
		{"NoDimensions", func(e *Emitter) {
			e.Count(Staged, nil, 3, nil)
		}, map[string]any{
			"_aws": emf(Staged, "Count"),
			Staged: float64(3),
		}},
		{"Bytes", func(e *Emitter) {
			e.Add(StagedBytes, UnitBytes, nil, 26214400, nil)
		}, map[string]any{
			"_aws":      emf(StagedBytes, "Bytes"),
			StagedBytes: float64(26214400),
		}},
		{"DimensionKeysSorted", func(e *Emitter) {
			e.Count(Fetched, map[string]string{"zone": "z", "a": "1", "m": "mid"}, 1, nil)
		}, map[string]any{
			"_aws":  emf(Fetched, "Count", "a", "m", "zone"),
			"a":     "1",
			"m":     "mid",
			"zone":  "z",
			Fetched: float64(1),
		}},
		{"Props", func(e *Emitter) {
			e.Count(Acked, nil, 1, map[string]any{
				"workspace_id": "w1", "raced": true, "n": 2, "list": []int{1, 2},
			})
		}, map[string]any{
			"_aws":         emf(Acked, "Count"),
			Acked:          float64(1),
			"workspace_id": "w1",
			"raced":        true,
			"n":            float64(2),
			"list":         []any{float64(1), float64(2)},
		}},
		{"FractionalValue", func(e *Emitter) {
			e.Count(Staged, nil, 0.5, nil)
		}, map[string]any{
			"_aws": emf(Staged, "Count"),
			Staged: 0.5,
		}},
		{"ReservedMembersWin", func(e *Emitter) {
			e.Count(Swept,
				map[string]string{Outcome: OutcomeAcked, "_aws": "x", Swept: "x"},
				2,
				map[string]any{"_aws": "x", Swept: 99, Outcome: "x", "bad": make(chan int), "ok": "y"})
		}, map[string]any{
			"_aws":  emf(Swept, "Count", Outcome),
			Outcome: OutcomeAcked,
			Swept:   float64(2),
			"ok":    "y",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, buf := newTestEmitter(t)
			tt.emit(e)
			docs := decodeLines(t, buf.String())
			if len(docs) != 1 {
				t.Fatalf("got %d lines, want 1: %q", len(docs), buf.String())
			}
			if !reflect.DeepEqual(docs[0], tt.want) {
				t.Errorf("got %v, want %v", docs[0], tt.want)
			}
		})
	}
}

func TestEmitterLineStartsWithMetadata(t *testing.T) {
	e, buf := newTestEmitter(t)
	e.Count(Swept, map[string]string{Outcome: OutcomeError}, 1, nil)
	want := `{"_aws":{"Timestamp":1777897800123,"CloudWatchMetrics":[{"Namespace":"PendingUploads",` +
		`"Dimensions":[["outcome"]],"Metrics":[{"Name":"pending_uploads_swept","Unit":"Count"}]}]},` +
		`"outcome":"error","pending_uploads_swept":1}` + "\n"
	if got := buf.String(); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestEmitterDropped(t *testing.T) {
	tests := []struct {
		name string
		emit func(e *Emitter)
	}{
		{"NaN", func(e *Emitter) { e.Count(Staged, nil, math.NaN(), nil) }},
		{"Inf", func(e *Emitter) { e.Count(Staged, nil, math.Inf(1), nil) }},
		{"EmptyName", func(e *Emitter) { e.Count("", nil, 1, nil) }},
		{"NameAws", func(e *Emitter) { e.Count("_aws", nil, 1, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, buf := newTestEmitter(t)
			tt.emit(e)
			if buf.Len() != 0 {
				t.Errorf("got %q, want nothing", buf.String())
			}
		})
	}
}

func TestEmitterNoOp(t *testing.T) {
	t.Run("NilEmitter", func(t *testing.T) {
		var e *Emitter
		e.Count(Swept, map[string]string{Outcome: OutcomeAcked}, 1, nil)
		e.Add(StagedBytes, UnitBytes, nil, 10, map[string]any{"k": "v"})
	})
	t.Run("NilWriter", func(t *testing.T) {
		New(nil, Namespace).Count(Staged, nil, 1, nil)
	})
	t.Run("ZeroEmitter", func(t *testing.T) {
		var e Emitter
		e.Count(Staged, nil, 1, nil)
	})
}

func TestEmitterDefaultClock(t *testing.T) {
	var buf bytes.Buffer
	before := time.Now().UnixMilli()
	New(&buf, Namespace).Count(Staged, nil, 1, nil)
	after := time.Now().UnixMilli()
	docs := decodeLines(t, buf.String())
	ts := int64(docs[0]["_aws"].(map[string]any)["Timestamp"].(float64))
	if ts < before || ts > after {
		t.Errorf("got Timestamp %d, want within [%d, %d]", ts, before, after)
	}
}

// lockedWriter fails the test if two Writes overlap.
type lockedWriter struct {
	t      *testing.T
	mu     sync.Mutex
	busy   bool
	buf    bytes.Buffer
	writes int
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.busy {
		w.t.Error("concurrent Write")
	}
	w.busy = true
	w.mu.Unlock()

	time.Sleep(time.Microsecond)
	n, err := w.buf.Write(p) // unguarded on purpose: -race sees overlaps

	w.mu.Lock()
	w.busy = false
	w.writes++
	w.mu.Unlock()
	return n, err
}

func TestEmitterConcurrent(t *testing.T) {
	const goroutines, each = 16, 50
	w := &lockedWriter{t: t}
	e := New(w, Namespace)
	e.Now = func() time.Time { return fixedNow }

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e.Count(Swept, map[string]string{Outcome: OutcomeAcked}, float64(g*each+i), nil)
			}
		})
	}
	wg.Wait()

	if w.writes != goroutines*each {
		t.Errorf("got %d writes, want %d", w.writes, goroutines*each)
	}
	docs := decodeLines(t, w.buf.String())
	if len(docs) != goroutines*each {
		t.Fatalf("got %d lines, want %d", len(docs), goroutines*each)
	}
	seen := make(map[float64]bool)
	for _, d := range docs {
		seen[d[Swept].(float64)] = true
	}
	if len(seen) != goroutines*each {
		t.Errorf("got %d distinct values, want %d", len(seen), goroutines*each)
	}
}

func TestEmitterFields(t *testing.T) {
	e, buf := newTestEmitter(t)
	e.Fields = func() map[string]any {
		return map[string]any{"aws_request_id": "req-1", "cold_start": true, "workspace_id": "from-fields"}
	}
	e.Count(Acked, nil, 1, map[string]any{"workspace_id": "w1"})
	docs := decodeLines(t, buf.String())
	want := map[string]any{
		"_aws": emf(Acked, "Count"), Acked: float64(1),
		"aws_request_id": "req-1", "cold_start": true, "workspace_id": "w1",
	}
	if !reflect.DeepEqual(docs[0], want) {
		t.Errorf("got %v, want %v", docs[0], want)
	}
}

// TestEmitterOnly: with Only set, a name outside it writes nothing and a
// name in it writes its line; Names holds every metric name once.
func TestEmitterOnly(t *testing.T) {
	var buf bytes.Buffer
	e := New(&buf, Namespace)
	e.Only = map[string]bool{BacklogOldestAge: true}
	e.Count(Staged, nil, 1, nil)
	e.Count(Swept, map[string]string{Outcome: OutcomeAcked}, 1, nil)
	e.Add(BacklogOldestAge, UnitSeconds, nil, 5, nil)
	docs := decodeLines(t, buf.String())
	if len(docs) != 1 || docs[0][BacklogOldestAge] != float64(5) {
		t.Fatalf("got %v, want the one line of %s", docs, BacklogOldestAge)
	}
	seen := map[string]bool{}
	for _, n := range Names {
		if seen[n] {
			t.Errorf("Names holds %s twice", n)
		}
		seen[n] = true
	}
}
