package limits_test

import (
	"testing"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// TestClientAgrees: the Go client, a module of its own that cannot import
// this package, restates three caps; they are this package's.
func TestClientAgrees(t *testing.T) {
	for _, c := range []struct {
		name         string
		client, ours int64
	}{
		{"client.DefaultMaxRequestBytes", client.DefaultMaxRequestBytes, limits.DefaultRequestBytes},
		{"client.MaxFileBytes", client.MaxFileBytes, limits.DefaultFileBytes},
		{"client.MaxFilesPerRequest", client.MaxFilesPerRequest, limits.MaxFiles},
	} {
		if c.client != c.ours {
			t.Errorf("%s is %d, the server's cap %d", c.name, c.client, c.ours)
		}
	}
}
