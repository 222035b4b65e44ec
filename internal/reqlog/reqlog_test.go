package reqlog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// capture returns a logger through NewHandler and a function that decodes
// the lines it wrote since the last call.
func capture(t *testing.T) (*slog.Logger, func() []map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	return log, func() []map[string]any {
		t.Helper()
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			lines = append(lines, m)
		}
		buf.Reset()
		return lines
	}
}

func lambdaCtx(id string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
}

// ids picks the request-id fields of a line.
func idsOf(line map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{KeyAWSRequestID, KeyAPIGWRequestID, KeyColdStart, KeyRequestID} {
		if v, ok := line[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestInvocations runs in order, as a Lambda process does: lines logged
// with or without the invocation's context carry its ids, the first
// invocation's lines say cold_start, and lines between invocations and
// after end carry none.
func TestInvocations(t *testing.T) {
	invoked.Store(false) // a fresh process
	log, lines := capture(t)

	log.Info("init")
	ctx, end := Begin(lambdaCtx("req-1"), "gw-1")
	log.Info("no ctx", "k", "v")
	log.InfoContext(ctx, "with ctx")
	log.With("a", 1).Warn("derived logger")
	end()
	log.Info("between")

	ctx, end = Begin(lambdaCtx("req-2"), "gw-2")
	log.Error("warm")
	log.InfoContext(ctx, "warm ctx")
	end()

	_, end = Begin(lambdaCtx("req-3"), "") // a scheduled event: no API Gateway id
	log.Info("sweep")
	end()

	cold := map[string]any{KeyAWSRequestID: "req-1", KeyAPIGWRequestID: "gw-1", KeyColdStart: true}
	warm := map[string]any{KeyAWSRequestID: "req-2", KeyAPIGWRequestID: "gw-2"}
	want := []map[string]any{{}, cold, cold, cold, {}, warm, warm, {KeyAWSRequestID: "req-3"}}
	got := lines()
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %v", len(got), len(want), got)
	}
	for i, l := range got {
		if g := idsOf(l); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("line %d (%v): ids %v, want %v", i, l["msg"], g, want[i])
		}
	}
	if got[1]["k"] != "v" || got[3]["a"] != float64(1) {
		t.Errorf("the lines' own attributes were lost: %v, %v", got[1], got[3])
	}
}

// TestContextWins: a line logged with a request's context carries that
// request's ids even while another invocation is recorded as running (the
// dev server's concurrent requests).
func TestContextWins(t *testing.T) {
	log, lines := capture(t)
	_, end := Begin(lambdaCtx("req-x"), "gw-x")
	defer end()
	log.InfoContext(WithRequestID(context.Background(), "dev-1"), "dev request")
	got := lines()
	if len(got) != 1 || !reflect.DeepEqual(idsOf(got[0]), map[string]any{KeyRequestID: "dev-1"}) {
		t.Errorf("got %v, want only request_id dev-1", got)
	}
}

func TestFields(t *testing.T) {
	if f := Fields(); f != nil {
		t.Errorf("between invocations: got %v, want nil", f)
	}
	_, end := Begin(lambdaCtx("req-f"), "gw-f")
	got := Fields()
	end()
	delete(got, KeyColdStart) // there only if this test ran first
	want := map[string]any{KeyAWSRequestID: "req-f", KeyAPIGWRequestID: "gw-f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
