// Package faultkit holds what the fault tests (internal/faulttest and its
// subpackages) share: building and sending requests with a bounded wait,
// and sending calls while a dependency is frozen (Frozen), with the
// answers they must get.
package faultkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"time"
)

// File is one part of a multipart upload.
type File struct {
	Name    string
	Type    string
	Content []byte
}

// Multipart returns a form-A upload body of files, each in a part named
// "files", and its Content-Type.
func Multipart(files ...File) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, f.Name))
		if f.Type != "" {
			h.Set("Content-Type", f.Type)
		}
		pw, _ := mw.CreatePart(h) // a bytes.Buffer never fails
		_, _ = pw.Write(f.Content)
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// Response is an answer read in full, with how long it took.
type Response struct {
	Status  int
	Body    []byte
	Elapsed time.Duration
}

// Do sends one request with a bearer token and reads the whole answer,
// giving up after timeout.
func Do(client *http.Client, timeout time.Duration, method, url, token, ctype string, body []byte) (Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Response{Elapsed: time.Since(start)}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Elapsed: time.Since(start)}, err
}
