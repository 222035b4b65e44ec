package deploytest

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/locals3"
)

// TestLocalBucketIsTheTemplates holds the bucket make run-s3 creates
// (locals3.Lifecycle and locals3.CORS) to template.yaml's ContentBucket,
// so that the local production shape expires and shares what the
// deployed bucket does.
func TestLocalBucketIsTheTemplates(t *testing.T) {
	tpl := loadTemplate(t)
	rules := get(tpl.doc, "Resources", "ContentBucket", "Properties", "LifecycleConfiguration", "Rules")
	if rules == nil || rules.Kind != yaml.SequenceNode {
		t.Fatal("ContentBucket: no LifecycleConfiguration.Rules")
	}
	local := locals3.Lifecycle().Rules
	if len(rules.Content) != len(local) {
		t.Fatalf("lifecycle: template has %d rules, locals3 %d", len(rules.Content), len(local))
	}
	for i, r := range rules.Content {
		l := local[i]
		days, _ := strconv.Atoi(scalar(get(r, "ExpirationInDays")))
		abort, _ := strconv.Atoi(scalar(get(r, "AbortIncompleteMultipartUpload", "DaysAfterInitiation")))
		if scalar(get(r, "Id")) != aws.ToString(l.ID) || scalar(get(r, "Status")) != string(l.Status) ||
			scalar(get(r, "Prefix")) != aws.ToString(l.Filter.Prefix) || int32(days) != aws.ToInt32(l.Expiration.Days) ||
			int32(abort) != aws.ToInt32(l.AbortIncompleteMultipartUpload.DaysAfterInitiation) {
			t.Errorf("lifecycle rule %d: template %s %s %s %d days (abort %d), locals3 %s %s %s %d days (abort %d)", i,
				scalar(get(r, "Id")), scalar(get(r, "Status")), scalar(get(r, "Prefix")), days, abort,
				aws.ToString(l.ID), l.Status, aws.ToString(l.Filter.Prefix), aws.ToInt32(l.Expiration.Days),
				aws.ToInt32(l.AbortIncompleteMultipartUpload.DaysAfterInitiation))
		}
	}

	cors := get(tpl.doc, "Resources", "ContentBucket", "Properties", "CorsConfiguration")
	if cors == nil || cors.Tag != "!If" || len(cors.Content) != 3 {
		t.Fatal("ContentBucket.CorsConfiguration: want !If [HasCors, rules, NoValue]")
	}
	trules := get(cors.Content[1], "CorsRules")
	lrules := locals3.CORS([]string{"https://canvas.example.com"}).CORSRules
	if trules == nil || len(trules.Content) != len(lrules) {
		t.Fatalf("cors: template and locals3 differ in their number of rules")
	}
	tr, lr := trules.Content[0], lrules[0]
	maxAge, _ := strconv.Atoi(scalar(get(tr, "MaxAge")))
	for _, c := range []struct {
		what        string
		tpl, locals []string
	}{
		{"AllowedMethods", seq(get(tr, "AllowedMethods")), lr.AllowedMethods},
		{"AllowedHeaders", seq(get(tr, "AllowedHeaders")), lr.AllowedHeaders},
		{"ExposedHeaders", seq(get(tr, "ExposedHeaders")), lr.ExposeHeaders},
	} {
		if !slices.Equal(c.tpl, c.locals) {
			t.Errorf("cors %s: template %v, locals3 %v", c.what, c.tpl, c.locals)
		}
	}
	if int32(maxAge) != aws.ToInt32(lr.MaxAgeSeconds) {
		t.Errorf("cors MaxAge: template %d, locals3 %d", maxAge, aws.ToInt32(lr.MaxAgeSeconds))
	}
	if !slices.Equal(lr.AllowedOrigins, []string{"https://canvas.example.com"}) {
		t.Errorf("locals3.CORS: AllowedOrigins %v, want the origins it is given", lr.AllowedOrigins)
	}

	// The origins: the API's browser origins and its public origin, as
	// locals3.BucketOrigins makes them; no rule without either. A
	// same-origin canvas (PublicOrigin alone) still PUTs to the bucket's
	// host, another origin.
	for _, c := range []struct{ cors, public string }{
		{"", ""}, {"https://a.example.com,https://b.example.com", ""},
		{"", "https://canvas.example.com"}, {"https://a.example.com", "https://canvas.example.com"},
	} {
		s := newShape(t, tpl, map[string]string{"CorsAllowedOrigins": c.cors, "PublicOrigin": c.public})
		var corsList []string
		if c.cors != "" {
			corsList = strings.Split(c.cors, ",")
		}
		want := locals3.BucketOrigins(corsList, c.public)
		cfg := get(s.resources()["ContentBucket"], "Properties", "CorsConfiguration")
		if len(want) == 0 {
			if cfg != nil {
				t.Errorf("CorsAllowedOrigins %q, PublicOrigin %q: a CORS rule, want none", c.cors, c.public)
			}
			continue
		}
		rules := get(cfg, "CorsRules")
		if rules == nil || len(rules.Content) != 1 {
			t.Errorf("CorsAllowedOrigins %q, PublicOrigin %q: no CORS rule, want one for %v", c.cors, c.public, want)
			continue
		}
		if got := s.strs(get(rules.Content[0], "AllowedOrigins")); !slices.Equal(got, want) {
			t.Errorf("CorsAllowedOrigins %q, PublicOrigin %q: the bucket's AllowedOrigins %v, locals3.BucketOrigins %v", c.cors, c.public, got, want)
		}
	}
}

// strs is the value of a list of strings, as CloudFormation makes it: a
// Ref to a list parameter, a sequence of strings, or an Fn::Split.
func (s *shape) strs(n *yaml.Node) []string {
	if name, args := fn(n); name == "Fn::Split" {
		return strings.Split(s.str(args[1]), s.str(args[0]))
	}
	return s.list(n)
}
