package client

import (
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// textPlain is the type of the text files typeOfFile recognises.
const textPlain = "text/plain; charset=utf-8"

// textNames are files known to be text whose extension the machine's MIME
// tables misread or do not know (go.mod is audio/x-mod in freedesktop's
// table, go.sum nothing at all).
var textNames = map[string]bool{"go.mod": true, "go.sum": true, "go.work": true, "go.work.sum": true}

// misreadExts are extensions whose table entry is right only for some
// files (.mod: Go modules, and tracker music): the bytes decide.
var misreadExts = map[string]bool{".mod": true, ".sum": true, ".work": true}

// typeOfFile is the MIME type FileFromPath declares for the file at path:
// text/plain for the known text names; otherwise the type of its
// extension (mime.TypeByExtension), unless the extension is unknown or
// one the tables misread and the first 512 bytes sniff as text
// (http.DetectContentType), which is then the answer. "" when nothing
// is known: the server then serves application/octet-stream.
func typeOfFile(path string) string {
	if textNames[strings.ToLower(filepath.Base(path))] {
		return textPlain
	}
	ext := strings.ToLower(filepath.Ext(path))
	byExt := mime.TypeByExtension(ext)
	if byExt != "" && !misreadExts[ext] {
		return byExt
	}
	if sniffed := sniff(path); strings.HasPrefix(sniffed, "text/") {
		return sniffed
	}
	return byExt
}

// sniff is http.DetectContentType of the first 512 bytes of the file at
// path, or "" when it cannot be read.
func sniff(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return ""
	}
	if n == 0 {
		return ""
	}
	return http.DetectContentType(buf[:n])
}
