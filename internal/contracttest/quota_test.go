package contracttest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestQuotaAnswersMatchDocument: the quota's refusals (multipart, presign,
// commit), the limits that report it, and a refused query on the limits
// route match openapi.yaml.
func TestQuotaAnswersMatchDocument(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"MAX_FILE_BYTES": "2000", "WORKSPACE_MAX_PENDING_BYTES": "3000", "INLINE_MAX_BYTES": "1024"}})
	c := newChecker(t, srv.URL)
	base := srv.URL + "/workspaces/" + uuid.NewString()
	tok := srv.AdminToken
	c.do("limits with a quota", request(t, "GET", srv.URL+"/uploads/limits", "", "", nil), http.StatusOK)
	c.do("limits unknown parameter", request(t, "GET", srv.URL+"/uploads/limits?x=1", "", "", nil), http.StatusBadRequest)
	body, ctype := multipartBody(t, part{"a.bin", "", strings.Repeat("a", 2000)})
	c.do("upload within the quota", request(t, "POST", base+"/chat/uploads", tok, ctype, body), http.StatusOK)
	pres := c.do("presign within the quota", request(t, "POST", base+"/chat/uploads/presign", tok, "application/json",
		[]byte(`{"files":[{"name":"p.bin","size":1000}]}`)), http.StatusOK)
	up := decode[struct {
		Uploads []struct {
			UploadID string            `json:"upload_id"`
			URL      string            `json:"url"`
			Headers  map[string]string `json:"headers"`
		} `json:"uploads"`
	}](t, "presign", pres).Uploads[0]
	c.do("presign over the quota", request(t, "POST", base+"/chat/uploads/presign", tok, "application/json",
		[]byte(`{"files":[{"name":"q.bin","size":1001}]}`)), http.StatusConflict)
	c.do("upload over the quota", request(t, "POST", base+"/chat/uploads", tok, ctype, body), http.StatusConflict)
	put(t, up.URL, up.Headers, []byte(strings.Repeat("p", 1000)))
	small, sctype := multipartBody(t, part{"b.bin", "", "b"})
	c.do("upload the last byte", request(t, "POST", base+"/chat/uploads", tok, sctype, small), http.StatusOK)
	c.do("commit over the quota", request(t, "POST", base+"/chat/uploads", tok, "application/json",
		[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, up.UploadID))), http.StatusConflict)
}
