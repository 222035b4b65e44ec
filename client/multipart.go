package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
)

// One multipart/form-data request of files: its body laid out without
// reading the files, streamed from them as it goes, all or nothing on the
// server.

// multipartBody lays out a multipart/form-data body of files without
// reading them: the part headers between the files' bytes.
type multipartBody struct {
	contentType string
	heads       [][]byte // heads[i] precedes file i; heads[len(files)] closes
	size        int64
}

func layoutMultipart(files []UploadFile) multipartBody {
	var buf bytes.Buffer
	// A random boundary for each body (a file cannot break it on purpose);
	// its length is fixed, so sizes computed for packing hold.
	mw := multipart.NewWriter(&buf)
	mb := multipartBody{contentType: mw.FormDataContentType()}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="files"; filename="`+quoteName(f.Name)+`"`)
		mt := f.MimeType
		if mt == "" {
			mt = "application/octet-stream"
		}
		h.Set("Content-Type", strings.Map(dropControl, mt))
		_, _ = mw.CreatePart(h)
		mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
		mb.size += int64(buf.Len()) + f.Size
		buf.Reset()
	}
	_ = mw.Close()
	mb.heads = append(mb.heads, bytes.Clone(buf.Bytes()))
	mb.size += int64(buf.Len())
	return mb
}

func multipartLen(files []UploadFile) int64 { return layoutMultipart(files).size }

func dropControl(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return '_'
	}
	return r
}

// quoteName escapes a file name for a quoted-string; control characters
// (CR/LF would end the header) become '_', as the server's sanitizer
// would make them anyway.
func quoteName(s string) string {
	s = strings.Map(dropControl, s)
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// UploadMultipart stages files for ws in one multipart/form-data request:
// all or nothing. It does not split, fall back, or retry; see Upload.
func (c *Client) UploadMultipart(ctx context.Context, ws uuid.UUID, files []UploadFile) ([]StagedFile, error) {
	mb := layoutMultipart(files)
	counts := make([]tries, len(files))
	for i, f := range files {
		counts[i].p = newProgress(f, 0)
	}
	body := func() (io.ReadCloser, error) {
		var rs []io.Reader
		var opened []*lazyFile
		for i, f := range files {
			lf := &lazyFile{f: f}
			opened = append(opened, lf)
			rs = append(rs, bytes.NewReader(mb.heads[i]), counts[i].wrap(lf))
		}
		rs = append(rs, bytes.NewReader(mb.heads[len(files)]))
		return &multiCloser{Reader: io.MultiReader(rs...), files: opened}, nil
	}
	resp, err := c.send(ctx, request{
		method: "POST", url: c.endpoint(nil, "workspaces", ws.String(), "chat", "uploads"),
		body: body, size: mb.size, contentType: mb.contentType, auth: true, op: "upload",
	})
	if err != nil {
		return nil, err
	}
	return readStaged(resp, "upload", len(files))
}

func readStaged(resp *http.Response, op string, n int) ([]StagedFile, error) {
	var sb wire.StagedAnswer
	if err := decodeJSON(resp, op, &sb); err != nil {
		return nil, err
	}
	if len(sb.Files) != n {
		return nil, fmt.Errorf("%s: the server answered %d files for %d sent", op, len(sb.Files), n)
	}
	return sb.Files, nil
}

// lazyFile opens an UploadFile on first read, yields exactly Size bytes
// (an error if the file is shorter or longer now), and closes it at the end.
type lazyFile struct {
	f    UploadFile
	rc   io.ReadCloser
	n    int64
	done bool
}

func (l *lazyFile) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.rc == nil {
		rc, err := l.f.Open()
		if err != nil {
			return 0, fmt.Errorf("open %s: %w", l.f.Name, err)
		}
		l.rc = rc
	}
	if l.n == l.f.Size {
		var one [1]byte
		if k, _ := io.ReadFull(l.rc, one[:]); k > 0 {
			return 0, fmt.Errorf("%s: grew while being sent (want %d bytes)", l.f.Name, l.f.Size)
		}
		l.done = true
		l.rc.Close()
		return 0, io.EOF
	}
	if int64(len(p)) > l.f.Size-l.n {
		p = p[:l.f.Size-l.n]
	}
	k, err := l.rc.Read(p)
	l.n += int64(k)
	if err == io.EOF {
		if l.n < l.f.Size {
			return k, fmt.Errorf("%s: shrank while being sent (%d of %d bytes)", l.f.Name, l.n, l.f.Size)
		}
		err = nil
	}
	return k, err
}

func (l *lazyFile) Close() error {
	if l.rc != nil && !l.done {
		l.done = true
		return l.rc.Close()
	}
	return nil
}

type multiCloser struct {
	io.Reader
	files []*lazyFile
}

func (m *multiCloser) Close() error {
	for _, f := range m.files {
		f.Close()
	}
	return nil
}
