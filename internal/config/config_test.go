package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DATABASE_URL": "postgres://x", "ADMIN_TOKEN": strings.Repeat("a", 32)}),
		config.NeedDatabase|config.NeedAdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if c.InlineMaxBytes != 262144 || c.MaxRequestBytes != 4194304 || c.MaxFileBytes != 26214400 ||
		c.UploadTTL != 24*time.Hour || c.AckRetention != time.Hour || c.ContentBucket != "" || c.S3ForcePathStyle ||
		c.RequestTimeout != 10*time.Second || c.AcceptUnanchoredOrgTokens {
		t.Fatalf("defaults: got %+v", c)
	}
}

// TestDatabaseQueryMode: cache_statement unless set; exec when asked.
func TestDatabaseQueryMode(t *testing.T) {
	for v, want := range map[string]config.QueryMode{"": config.QueryModeCacheStatement, "exec": config.QueryModeExec,
		" exec ": config.QueryModeExec, "cache_statement": config.QueryModeCacheStatement} {
		c, err := config.Load(env(map[string]string{"DATABASE_QUERY_MODE": v}), 0)
		if err != nil || c.DatabaseQueryMode != want {
			t.Errorf("DATABASE_QUERY_MODE=%q: got %q, %v; want %q", v, c.DatabaseQueryMode, err, want)
		}
	}
}

func TestAdminTokenTrimmed(t *testing.T) {
	c, err := config.Load(env(map[string]string{"ADMIN_TOKEN": "  a-token-of-some-length\n"}), 0)
	if err != nil || c.AdminToken != "a-token-of-some-length" {
		t.Fatalf("got %q, %v", c.AdminToken, err)
	}
}

func TestNegativeRetentionIsZero(t *testing.T) {
	c, err := config.Load(env(map[string]string{"ACK_RETENTION": "-5m"}), 0)
	if err != nil || c.AckRetention != 0 {
		t.Fatalf("got %v, %v; want 0", c.AckRetention, err)
	}
}

// TestBadValuesNameTheVariable: every refusal says which variable.
func TestBadValuesNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"INLINE_MAX_BYTES":             {"INLINE_MAX_BYTES": "lots"},
		"MAX_REQUEST_BYTES":            {"MAX_REQUEST_BYTES": "-1"},
		"MAX_FILE_BYTES":               {"MAX_FILE_BYTES": "104857601"},
		"UPLOAD_TTL":                   {"UPLOAD_TTL": "a day"},
		"ACK_RETENTION":                {"ACK_RETENTION": "1 hour"},
		"S3_FORCE_PATH_STYLE":          {"S3_FORCE_PATH_STYLE": "yes please"},
		"ACCEPT_UNANCHORED_ORG_TOKENS": {"ACCEPT_UNANCHORED_ORG_TOKENS": "legacy"},
		"ADMIN_TOKEN":                  {"ADMIN_TOKEN": "short"},
		"DATABASE_URL":                 {},
		"ADMIN_TOKEN_SECRET_ARN":       {"DATABASE_URL": "postgres://x"},
		"DATABASE_QUERY_MODE":          {"DATABASE_QUERY_MODE": "simple_protocol"},
		"REQUEST_TIMEOUT":              {"REQUEST_TIMEOUT": "10"},
		"METRICS":                      {"METRICS": "pending_uploads_backlog_oldest_age_seconds,cpu"},
		"ACTIVITY_RETENTION":           {"ACTIVITY_RETENTION": "-1h"},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(env(m), config.NeedDatabase|config.NeedAdminToken)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want an error naming %s", err, name)
			}
		})
	}
	t.Run("ActivityRetention", func(t *testing.T) {
		if c := config.Defaults(); c.ActivityRetention != 30*24*time.Hour {
			t.Errorf("default: got %v, want 720h", c.ActivityRetention)
		}
		c, err := config.Load(env(map[string]string{"ACTIVITY_RETENTION": "0"}), 0)
		if err != nil || c.ActivityRetention != 0 {
			t.Errorf("0: got %v, %v; want 0 (keep)", c.ActivityRetention, err)
		}
	})
	t.Run("ZeroFileCap", func(t *testing.T) {
		_, err := config.Load(env(map[string]string{"MAX_FILE_BYTES": "0"}), 0)
		if err == nil || !strings.Contains(err.Error(), "MAX_FILE_BYTES") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("RowsOutliveTheBucketBackstop", func(t *testing.T) {
		_, err := config.Load(env(map[string]string{"CONTENT_BUCKET": "b", "UPLOAD_TTL": "71h", "ACK_RETENTION": "2h"}), 0)
		if err == nil || !strings.Contains(err.Error(), "UPLOAD_TTL") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("AcceptUnanchoredOrgTokens", func(t *testing.T) {
		c, err := config.Load(env(map[string]string{"ACCEPT_UNANCHORED_ORG_TOKENS": "true"}), 0)
		if err != nil || !c.AcceptUnanchoredOrgTokens {
			t.Fatalf("got %v, %v; want true", c.AcceptUnanchoredOrgTokens, err)
		}
	})
	t.Run("FileCapUpTo100MiB", func(t *testing.T) {
		c, err := config.Load(env(map[string]string{"MAX_FILE_BYTES": "104857600"}), 0)
		if err != nil || c.MaxFileBytes != 104857600 {
			t.Fatalf("got %d, %v", c.MaxFileBytes, err)
		}
	})
	t.Run("RequestTimeoutOutOfRange", func(t *testing.T) {
		for _, v := range []string{"0s", "500ms", "16m", "-10s"} {
			if _, err := config.Load(env(map[string]string{"REQUEST_TIMEOUT": v}), 0); err == nil || !strings.Contains(err.Error(), "REQUEST_TIMEOUT") {
				t.Errorf("REQUEST_TIMEOUT=%s: got %v, want an error naming it", v, err)
			}
		}
		if c, err := config.Load(env(map[string]string{"REQUEST_TIMEOUT": "25s"}), 0); err != nil || c.RequestTimeout != 25*time.Second {
			t.Errorf("REQUEST_TIMEOUT=25s: got %s, %v", c.RequestTimeout, err)
		}
	})
	t.Run("ZeroTTL", func(t *testing.T) {
		if _, err := config.Load(env(map[string]string{"UPLOAD_TTL": "0s"}), 0); err == nil || !strings.Contains(err.Error(), "UPLOAD_TTL") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestDownloadLinkSettings: DOWNLOAD_LINK_TTL is 5 minutes unless set,
// at most an hour; a TTL outside 1s..1h or not a duration, a short
// DOWNLOAD_LINK_KEY, or no key where one is needed (the content
// function) stops the process naming the variable.
func TestDownloadLinkSettings(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 5 * time.Minute, "90s": 90 * time.Second, "1h": time.Hour} {
		c, err := config.Load(env(map[string]string{"DOWNLOAD_LINK_TTL": v}), 0)
		if err != nil || c.DownloadLinkTTL != want {
			t.Errorf("DOWNLOAD_LINK_TTL=%q: got %v, %v; want %v", v, c.DownloadLinkTTL, err, want)
		}
	}
	for _, v := range []string{"61m", "2h", "0s", "-5m", "500ms", "five minutes"} {
		if _, err := config.Load(env(map[string]string{"DOWNLOAD_LINK_TTL": v}), 0); err == nil || !strings.Contains(err.Error(), "DOWNLOAD_LINK_TTL") {
			t.Errorf("DOWNLOAD_LINK_TTL=%q: got %v, want an error naming it", v, err)
		}
	}
	if _, err := config.Load(env(map[string]string{"DOWNLOAD_LINK_KEY": strings.Repeat("k", 31)}), 0); err == nil ||
		!strings.Contains(err.Error(), "DOWNLOAD_LINK_KEY") {
		t.Errorf("short key: got %v, want an error naming DOWNLOAD_LINK_KEY", err)
	}
	// Neither set: the database's keys, for a process that signs links.
	if c, err := config.Load(env(nil), config.NeedLinkKey); err != nil || !c.LinkKeysInDatabase {
		t.Errorf("no key: got %v, %v; want the database's keys", c.LinkKeysInDatabase, err)
	}
	if c, err := config.Load(env(nil), 0); err != nil || c.LinkKeysInDatabase {
		t.Errorf("no key, no links: got %v, %v; want no keys at all", c.LinkKeysInDatabase, err)
	}
	for _, m := range []map[string]string{{"DOWNLOAD_LINK_KEY": strings.Repeat("k", 32)}, {"DOWNLOAD_LINK_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k"}} {
		if c, err := config.Load(env(m), config.NeedLinkKey); err != nil || c.LinkKeysInDatabase {
			t.Errorf("%v: got %v, %v", m, c.LinkKeysInDatabase, err)
		}
	}
}

// TestCORSAllowedOrigins: a comma-separated list of exact origins; empty
// means none; anything that is not an origin stops the process.
func TestCORSAllowedOrigins(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"https://canvas.example.com", []string{"https://canvas.example.com"}},
		{"https://a.example.com, http://localhost:5173", []string{"https://a.example.com", "http://localhost:5173"}},
	} {
		got, err := config.Load(env(map[string]string{"CORS_ALLOWED_ORIGINS": c.in}), 0)
		if err != nil || strings.Join(got.CORSAllowedOrigins, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: got %q, %v; want %q", c.in, got.CORSAllowedOrigins, err, c.want)
		}
	}
	for _, bad := range []string{"*", "canvas.example.com", "https://canvas.example.com/", "https://a.example.com/app", "ftp://a.example.com", "https://"} {
		_, err := config.Load(env(map[string]string{"CORS_ALLOWED_ORIGINS": bad}), 0)
		if err == nil || !strings.Contains(err.Error(), "CORS_ALLOWED_ORIGINS") {
			t.Errorf("%q: got %v, want an error naming CORS_ALLOWED_ORIGINS", bad, err)
		}
	}
}

// TestSessionSettings: session cookies need the control plane's URL and
// the tenant's slug together, and somewhere a cookie may come from; each
// mistake names its variable.
func TestSessionSettings(t *testing.T) {
	ok := map[string]string{"CP_UPSTREAM_URL": "https://cp.example.com", "MOLECULE_ORG_SLUG": "acme", "PUBLIC_ORIGIN": "https://app.example.com"}
	c, err := config.Load(env(ok), 0)
	if err != nil || c.CPUpstreamURL != "https://cp.example.com" || c.OrgSlug != "acme" ||
		len(c.SessionOrigins()) != 1 || c.SessionOrigins()[0] != "https://app.example.com" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{"CP_UPSTREAM_URL": "https://cp.example.com", "PUBLIC_ORIGIN": "https://app.example.com"}, "MOLECULE_ORG_SLUG"},
		{map[string]string{"MOLECULE_ORG_SLUG": "acme", "PUBLIC_ORIGIN": "https://app.example.com"}, "CP_UPSTREAM_URL"},
		{map[string]string{"CP_UPSTREAM_URL": "cp.example.com", "MOLECULE_ORG_SLUG": "acme", "PUBLIC_ORIGIN": "https://app.example.com"}, "CP_UPSTREAM_URL"},
		{map[string]string{"CP_UPSTREAM_URL": "https://cp.example.com", "MOLECULE_ORG_SLUG": "acme"}, "PUBLIC_ORIGIN or CORS_ALLOWED_ORIGINS"},
		{map[string]string{"PUBLIC_ORIGIN": "https://app.example.com/path"}, "PUBLIC_ORIGIN"},
		{map[string]string{"PUBLIC_ORIGIN": "https://a.example.com,https://b.example.com"}, "PUBLIC_ORIGIN"},
	} {
		if _, err := config.Load(env(bad.env), 0); err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%v: got %v, want an error naming %s", bad.env, err, bad.name)
		}
	}
}

// TestDBEndpoint: DB_HOST, DB_PORT and DB_NAME are read as given, unset
// is empty (the secret's), and a port that is not one names DB_PORT.
func TestDBEndpoint(t *testing.T) {
	c, err := config.Load(env(map[string]string{"DB_HOST": " db.internal ", "DB_PORT": "5433", "DB_NAME": "uploads"}), 0)
	if err != nil || c.DBEndpoint != (config.DBEndpoint{Host: "db.internal", Port: 5433, Name: "uploads"}) {
		t.Fatalf("got %+v, %v", c.DBEndpoint, err)
	}
	if c, err := config.Load(env(nil), 0); err != nil || c.DBEndpoint != (config.DBEndpoint{}) {
		t.Fatalf("unset: got %+v, %v; want the zero endpoint", c.DBEndpoint, err)
	}
	for _, bad := range []string{"0", "65536", "port", "-1"} {
		if _, err := config.Load(env(map[string]string{"DB_PORT": bad}), 0); err == nil || !strings.Contains(err.Error(), "DB_PORT") {
			t.Errorf("DB_PORT=%q: got %v, want an error naming DB_PORT", bad, err)
		}
	}
}

// TestMetrics: METRICS unset or "all" emits every metric (nil); a list
// keeps those names, in order.
func TestMetrics(t *testing.T) {
	for v, want := range map[string][]string{
		"":    nil,
		"all": nil,
		"pending_uploads_backlog_oldest_age_seconds, pending_uploads_staged": {"pending_uploads_backlog_oldest_age_seconds", "pending_uploads_staged"},
	} {
		c, err := config.Load(env(map[string]string{"METRICS": v}), 0)
		if err != nil || !slices.Equal(c.Metrics, want) {
			t.Errorf("METRICS=%q: got %v, %v, want %v", v, c.Metrics, err, want)
		}
	}
}

// TestAdminTokenSHA256: the hash of the admin token is a source of its
// own: 64 lower-case hex digits, as sha256sum prints them; anything else
// is an error naming ADMIN_TOKEN_SHA256 and never its value; it and the
// two other sources exclude each other, any two at once being an error
// naming both.
func TestAdminTokenSHA256(t *testing.T) {
	const hash = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	c, err := config.Load(env(map[string]string{"DATABASE_URL": "postgres://x", "ADMIN_TOKEN_SHA256": " " + hash + "\n"}),
		config.NeedDatabase|config.NeedAdminToken)
	if err != nil || c.AdminTokenSHA256 != hash {
		t.Fatalf("got %q, %v; want the hash", c.AdminTokenSHA256, err)
	}
	for name, v := range map[string]string{
		"UpperCase": strings.ToUpper(hash),
		"Short":     hash[:63],
		"Long":      hash + "0",
		"NotHex":    hash[:63] + "g",
		"TheToken":  "an-admin-token-not-its-hash-0123456789",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(env(map[string]string{"ADMIN_TOKEN_SHA256": v}), config.NeedAdminToken)
			if err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN_SHA256") || strings.Contains(err.Error(), v) {
				t.Fatalf("got %v, want an error naming ADMIN_TOKEN_SHA256 without the value", err)
			}
		})
	}
	const token, arn = "an-admin-token-0123456789", "arn:aws:secretsmanager:us-east-1:123456789012:secret:admin-AbCdEf"
	for name, m := range map[string]map[string]string{
		"TokenAndHash":   {"ADMIN_TOKEN": token, "ADMIN_TOKEN_SHA256": hash},
		"SecretAndHash":  {"ADMIN_TOKEN_SECRET_ARN": arn, "ADMIN_TOKEN_SHA256": hash},
		"TokenAndSecret": {"ADMIN_TOKEN": token, "ADMIN_TOKEN_SECRET_ARN": arn},
	} {
		t.Run("Exclusive/"+name, func(t *testing.T) {
			_, err := config.Load(env(m), 0)
			if err == nil {
				t.Fatal("got no error, want one naming both variables")
			}
			for k, v := range m {
				if !strings.Contains(err.Error(), k+" and") && !strings.Contains(err.Error(), k+":") {
					t.Errorf("got %v, want it to name %s", err, k)
				}
				if strings.Contains(err.Error(), v) {
					t.Errorf("got %v: it carries the value of %s", err, k)
				}
			}
		})
	}
}

// TestDBIAMUser: DB_IAM_USER satisfies NeedDatabase with DB_HOST and
// AWS_REGION, and is a clear error beside DATABASE_URL or DB_SECRET_ARN
// or without its host or region.
func TestDBIAMUser(t *testing.T) {
	ok := map[string]string{"DB_IAM_USER": "pendinguploads_app", "DB_HOST": "db.internal", "DB_NAME": "pendinguploads", "AWS_REGION": "us-east-1"}
	c, err := config.Load(env(ok), config.NeedDatabase)
	if err != nil || c.DBIAMUser != "pendinguploads_app" || c.AWSRegion != "us-east-1" || c.DBEndpoint.Host != "db.internal" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []struct {
		set, unset string
		want       string
	}{
		{set: "DATABASE_URL", want: "DB_IAM_USER: set with DATABASE_URL or DB_SECRET_ARN"},
		{set: "DB_SECRET_ARN", want: "DB_IAM_USER: set with DATABASE_URL or DB_SECRET_ARN"},
		{unset: "DB_HOST", want: "DB_IAM_USER: DB_HOST must be set"},
		{unset: "AWS_REGION", want: "DB_IAM_USER: AWS_REGION must be set"},
	} {
		e := map[string]string{}
		for k, v := range ok {
			e[k] = v
		}
		if bad.set != "" {
			e[bad.set] = "postgres://x@y/z"
		}
		delete(e, bad.unset)
		if _, err := config.Load(env(e), config.NeedDatabase); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: got %v, want %q", bad, err, bad.want)
		}
	}
}
