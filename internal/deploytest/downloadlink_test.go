package deploytest

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/config"
)

// linkKeySecret is the stack's generated key of download links, in every
// shape of the stack.
const linkKeySecret = "DownloadLinkKeySecret"

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
// configuration's; the content function alone reads the stack's
// generated key (long enough for the configuration) and serves the link
// routes.
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
	n, err := strconv.Atoi(scalar(get(tpl.doc, "Resources", "DownloadLinkKeySecret", "Properties", "GenerateSecretString", "PasswordLength")))
	if err != nil || n < config.MinLinkKeyLength {
		t.Errorf("DownloadLinkKeySecret: PasswordLength %d (%v), want at least %d", n, err, config.MinLinkKeyLength)
	}
	resources := map[string]*yaml.Node{}
	for i, res := 0, get(tpl.doc, "Resources"); i+1 < len(res.Content); i += 2 {
		resources[res.Content[i].Value] = res.Content[i+1]
	}
	for id, fn := range tpl.functions {
		reads := secretsReadBy(get(fn.node, "Properties", "Policies"), resources)["Ref:"+linkKeySecret]
		env := get(fn.node, "Properties", "Environment", "Variables", "DOWNLOAD_LINK_KEY_SECRET_ARN")
		if id == "Content" {
			if !reads || ref(env) != "DownloadLinkKeySecret" || ref(get(fn.node, "Properties", "Environment", "Variables", "DOWNLOAD_LINK_TTL")) != "DownloadLinkTtl" {
				t.Errorf("Content: want DOWNLOAD_LINK_KEY_SECRET_ARN !Ref DownloadLinkKeySecret, a policy to read it, DOWNLOAD_LINK_TTL !Ref DownloadLinkTtl")
			}
			continue
		}
		if reads || env != nil {
			t.Errorf("%s: reads the download links' key; only Content signs and checks links", id)
		}
	}
}
