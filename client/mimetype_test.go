package client_test

import (
	"mime"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/client"
)

// TestFileFromPathType: the type FileFromPath declares. Go's module
// files are text whatever the machine's MIME tables say (freedesktop's
// reads .mod as audio/x-mod, and knows no .sum); a text file without an
// extension is text; a binary .mod keeps its table's type; a known
// extension keeps its type.
func TestFileFromPathType(t *testing.T) {
	dir := t.TempDir()
	binary := []byte("M.K.\x00\x01\x02\x03\xff\xfe\x00\x00\x10\x20")
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  string // a prefix of the type
	}{
		{"go.mod", []byte("module example.com/x\n\ngo 1.26\n"), "text/plain"},
		{"go.sum", []byte("golang.org/x/sync v0.10.0 h1:abc=\n"), "text/plain"},
		{"go.work", []byte("go 1.26\n\nuse ./a\n"), "text/plain"},
		{"go.work.sum", []byte("golang.org/x/net v0.1.0 h1:abc=\n"), "text/plain"},
		{"tools.mod", []byte("module example.com/tools\n"), "text/plain"},
		{"Makefile", []byte("all:\n\tgo build ./...\n"), "text/plain"},
		{"song.mod", binary, mime.TypeByExtension(".mod")},
		{"photo.png", []byte("not really a png, but named one"), "image/png"},
		{"blob", binary, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, tc.bytes, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := client.FileFromPath(p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && f.MimeType != "" || !strings.HasPrefix(f.MimeType, tc.want) {
				t.Errorf("got %q, want %q", f.MimeType, tc.want)
			}
			if tc.want != "text/plain" && strings.HasPrefix(f.MimeType, "text/") {
				t.Errorf("got %q for binary bytes", f.MimeType)
			}
		})
	}
}
