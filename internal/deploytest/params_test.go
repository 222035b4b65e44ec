package deploytest

import (
	"strconv"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
)

// TestParameterRangesFitConfig: every value a numeric parameter of the
// template admits (its MinValue, MaxValue and Default) is one the
// configuration accepts, so that no deploy can pass CloudFormation and
// then stop every function at init; and MaxFileBytes reaches the
// configuration's own limit.
func TestParameterRangesFitConfig(t *testing.T) {
	tpl := loadTemplate(t)
	params := map[string]string{
		"MaxFileBytes":    "MAX_FILE_BYTES",
		"InlineMaxBytes":  "INLINE_MAX_BYTES",
		"MaxRequestBytes": "MAX_REQUEST_BYTES",
	}
	for param, env := range params {
		p := get(tpl.doc, "Parameters", param)
		if p == nil {
			t.Fatalf("parameter %s missing", param)
		}
		for _, key := range []string{"MinValue", "MaxValue", "Default"} {
			v := scalar(get(p, key))
			if v == "" {
				t.Errorf("%s: no %s: the template admits values the configuration refuses", param, key)
				continue
			}
			if _, err := config.Load(func(k string) string {
				if k == env {
					return v
				}
				return ""
			}, 0); err != nil {
				t.Errorf("%s %s %s: the configuration refuses it: %v", param, key, v, err)
			}
		}
	}
	if got := scalar(get(tpl.doc, "Parameters", "MaxFileBytes", "MaxValue")); got != "104857600" || config.MaxFileBytesCap != 104857600 {
		t.Errorf("MaxFileBytes MaxValue %s, configuration's cap %d: want both 104857600", got, config.MaxFileBytesCap)
	}
}

// TestContentOutlastsTheLargestFile: the content function streams a file
// of MaxFileBytes's largest value within its timeout, at the pace API
// Gateway sends a stream (its first 10 MB at full speed, then 2 MB/s), so
// that the cap's default of 100 MiB is one every client can fetch.
func TestContentOutlastsTheLargestFile(t *testing.T) {
	tpl := loadTemplate(t)
	largest, err := strconv.ParseFloat(scalar(get(tpl.doc, "Parameters", "MaxFileBytes", "MaxValue")), 64)
	if err != nil {
		t.Fatalf("MaxFileBytes MaxValue: %v", err)
	}
	need := max(largest-10e6, 0) / 2e6 // seconds
	timeout, err := strconv.Atoi(scalar(get(tpl.functions["Content"].node, "Properties", "Timeout")))
	if err != nil {
		t.Fatalf("Content Timeout: %v", err)
	}
	if float64(timeout) < need {
		t.Errorf("Content Timeout %d s: streaming %.0f bytes takes %.0f s at API Gateway's pace", timeout, largest, need)
	}
}

// TestQueryModeValuesFitConfig: every DatabaseQueryMode the template
// admits is a DATABASE_QUERY_MODE the configuration accepts, and its
// default is the configuration's own.
func TestQueryModeValuesFitConfig(t *testing.T) {
	tpl := loadTemplate(t)
	values := seq(get(tpl.doc, "Parameters", "DatabaseQueryMode", "AllowedValues"))
	if len(values) == 0 {
		t.Fatal("DatabaseQueryMode: no AllowedValues")
	}
	for _, v := range values {
		c, err := config.Load(func(k string) string {
			if k == "DATABASE_QUERY_MODE" {
				return v
			}
			return ""
		}, 0)
		if err != nil || string(c.DatabaseQueryMode) != v {
			t.Errorf("DatabaseQueryMode %s: the configuration reads %q, %v", v, c.DatabaseQueryMode, err)
		}
	}
	if got := scalar(get(tpl.doc, "Parameters", "DatabaseQueryMode", "Default")); got != string(config.Defaults().DatabaseQueryMode) {
		t.Errorf("DatabaseQueryMode: default %q, the configuration's %q", got, config.Defaults().DatabaseQueryMode)
	}
}

// TestRequestTimeoutFitsTheFunctions: every RequestTimeout the template
// admits is a REQUEST_TIMEOUT the configuration accepts (the environment
// gets it in seconds), and the largest ends, with lambdafn.Margin kept to
// answer, before the upload function's timeout: a request's deadline
// never outlives the invocation that answers it.
func TestRequestTimeoutFitsTheFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	p := get(tpl.doc, "Parameters", "RequestTimeout")
	if p == nil {
		t.Fatal("parameter RequestTimeout missing")
	}
	for _, key := range []string{"MinValue", "MaxValue", "Default"} {
		v := scalar(get(p, key))
		c, err := config.Load(func(k string) string {
			if k == "REQUEST_TIMEOUT" {
				return v + "s"
			}
			return ""
		}, 0)
		if err != nil || v == "" {
			t.Errorf("RequestTimeout %s %q: the configuration refuses it: %v", key, v, err)
		} else if key == "Default" && c.RequestTimeout != config.DefaultRequestTimeout {
			t.Errorf("RequestTimeout Default %s s, the configuration's default %s", v, config.DefaultRequestTimeout)
		}
	}
	largest, err := strconv.Atoi(scalar(get(p, "MaxValue")))
	if err != nil {
		t.Fatalf("RequestTimeout MaxValue: %v", err)
	}
	timeout, err := strconv.Atoi(scalar(get(tpl.doc, "Globals", "Function", "Timeout")))
	if fn := scalar(get(tpl.functions["Upload"].node, "Properties", "Timeout")); fn != "" {
		timeout, err = strconv.Atoi(fn)
	}
	if err != nil {
		t.Fatalf("Upload's Timeout: %v", err)
	}
	if limit := time.Duration(timeout)*time.Second - lambdafn.Margin; time.Duration(largest)*time.Second > limit {
		t.Errorf("RequestTimeout MaxValue %d s: past the upload function's %d s less lambdafn.Margin (%s)", largest, timeout, lambdafn.Margin)
	}
	if env := get(tpl.doc, "Globals", "Function", "Environment", "Variables", "REQUEST_TIMEOUT"); env == nil || env.Tag != "!Sub" || env.Value != "${RequestTimeout}s" {
		t.Errorf("Globals' REQUEST_TIMEOUT: want !Sub \"${RequestTimeout}s\"")
	}
}
