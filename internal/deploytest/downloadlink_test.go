package deploytest

import (
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/config"
)

// TestAccessLogLeavesOutTheQuery: API Gateway's access-log format names
// only variables that cannot carry a request's query string, where a
// download link's signature travels (API.md): $context.path is the path
// alone. A variable outside this list (a new one, or one that holds the
// query, as $context.requestOverride or an $input one would) fails here
// until it is judged.
func TestAccessLogLeavesOutTheQuery(t *testing.T) {
	tpl := loadTemplate(t)
	format := scalar(get(tpl.doc, "Resources", "Api", "Properties", "AccessLogSetting", "Format"))
	if format == "" {
		t.Fatal("template.yaml: Api has no AccessLogSetting.Format")
	}
	safe := []string{
		"$context.requestId", "$context.extendedRequestId", "$context.identity.sourceIp", "$context.requestTime",
		"$context.httpMethod", "$context.resourcePath", "$context.path", "$context.status", "$context.responseLength",
		"$context.responseLatency", "$context.integrationLatency", "$context.integrationStatus",
		"$context.integrationErrorMessage", "$context.error.message",
	}
	vars := regexp.MustCompile(`\$[A-Za-z][A-Za-z0-9_.]*`).FindAllString(format, -1)
	if len(vars) == 0 {
		t.Fatalf("access-log format %q: no variables", format)
	}
	for _, v := range vars {
		if !slices.Contains(safe, v) {
			t.Errorf("access-log format: %s is not known to leave the query string (a download link's signature) out", v)
		}
	}
}

// TestDownloadLinkSettings: every DownloadLinkTtl the template admits is a
// DOWNLOAD_LINK_TTL the configuration accepts, and its default is the
// configuration's; the content function gets it, and no function is given
// a key or a secret of one (DOWNLOAD_LINK_KEY, DOWNLOAD_LINK_KEY_SECRET_ARN):
// the keys are the database's (download_link_keys), so no function reads
// Secrets Manager for them and the stack keeps no secret of them.
func TestDownloadLinkSettings(t *testing.T) {
	tpl := loadTemplate(t)
	values := seq(get(tpl.doc, "Parameters", "DownloadLinkTtl", "AllowedValues"))
	if len(values) == 0 {
		t.Fatal("DownloadLinkTtl: no AllowedValues")
	}
	for _, v := range values {
		if _, err := config.Load(func(k string) string {
			if k == "DOWNLOAD_LINK_TTL" {
				return v
			}
			return ""
		}, 0); err != nil {
			t.Errorf("DownloadLinkTtl %s: the configuration refuses it: %v", v, err)
		}
	}
	if d, err := time.ParseDuration(scalar(get(tpl.doc, "Parameters", "DownloadLinkTtl", "Default"))); err != nil || d != config.DefaultDownloadLinkTTL {
		t.Errorf("DownloadLinkTtl: default %v (%v), the configuration's %v", d, err, config.DefaultDownloadLinkTTL)
	}
	content, ok := tpl.functions["Content"]
	if !ok || ref(get(content.node, "Properties", "Environment", "Variables", "DOWNLOAD_LINK_TTL")) != "DownloadLinkTtl" {
		t.Errorf("Content: want DOWNLOAD_LINK_TTL !Ref DownloadLinkTtl")
	}
	for id, fn := range tpl.functions {
		for _, v := range []string{"DOWNLOAD_LINK_KEY", "DOWNLOAD_LINK_KEY_SECRET_ARN"} {
			if get(fn.node, "Properties", "Environment", "Variables", v) != nil {
				t.Errorf("%s: %s is set; the download links' keys are the database's", id, v)
			}
		}
	}
	for i, res := 0, get(tpl.doc, "Resources"); i+1 < len(res.Content); i += 2 {
		if desc := scalar(get(res.Content[i+1], "Properties", "Description")); scalar(get(res.Content[i+1], "Type")) == "AWS::SecretsManager::Secret" &&
			regexp.MustCompile(`(?i)link`).MatchString(res.Content[i].Value+desc) {
			t.Errorf("%s: a secret of the download links' key; the keys are the database's", res.Content[i].Value)
		}
	}
}
