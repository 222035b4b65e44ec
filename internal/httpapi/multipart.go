package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"

	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// readFiles reads the parts named "files" that carry a file name, in
// order, refusing bad input with its answer (an *Error): among them a
// file over fileCap bytes, the per-file cap. With the body's
// length known (sizeHint > 0, already checked against limit), every file
// is read into one buffer of that size: the parts' bytes always fit in
// the body that carries them, so a request costs one allocation of its
// size, not a doubling buffer per file.
func readFiles(body io.Reader, boundary string, limit, sizeHint, fileCap int64) ([]pendinguploads.File, error) {
	var arena []byte
	if sizeHint > 0 {
		arena = make([]byte, 0, sizeHint)
	}
	malformed := func(err error) error {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errBodyTooLarge(limit)
		}
		return errMalformedMultipart
	}
	whole := newBodyCheck(body, boundary)
	mr := multipart.NewReader(whole, boundary)
	var files []pendinguploads.File
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			// The multipart reader also answers io.EOF for a body cut
			// right after a boundary line: only the closing delimiter
			// ends it. The rest (an epilogue) must then read to its end,
			// as long as the declared length: a short body is cut too.
			if !whole.closed {
				return nil, errMalformedMultipart
			}
			if _, err := io.Copy(io.Discard, whole); err != nil {
				return nil, malformed(err)
			}
			if sizeHint > 0 && whole.n != sizeHint {
				return nil, errMalformedMultipart
			}
			break
		}
		if err != nil {
			return nil, malformed(err)
		}
		field, raw, isFile, err := partDisposition(part)
		if err != nil {
			// A part we cannot read the name of may be a file: skipping it
			// would store the request without it. Refuse the request.
			return nil, errMalformedMultipart
		}
		if field != "files" || !isFile {
			// Other fields, and text values named files, do not count;
			// they still count towards the body cap.
			if _, err := io.Copy(io.Discard, part); err != nil {
				return nil, malformed(err)
			}
			continue
		}
		if len(files) == limits.MaxFiles {
			return nil, errTooManyFiles
		}
		name := sanitize.Filename(raw)
		var content []byte
		arena, content, err = readPart(arena, part, fileCap)
		if err != nil {
			return nil, malformed(err)
		}
		n := int64(len(content))
		if n > fileCap {
			rest, err := io.Copy(io.Discard, part)
			if err != nil {
				return nil, malformed(err)
			}
			return nil, errFileTooLarge(name, n+rest, fileCap)
		}
		if n == 0 {
			return nil, errEmptyFile(name)
		}
		files = append(files, pendinguploads.File{
			Content:  content,
			Filename: name,
			Mimetype: sanitize.Mimetype(part.Header.Get("Content-Type")),
		})
	}
	if len(files) == 0 {
		return nil, errNoFiles
	}
	return files, nil
}

// bodyCheck counts the bytes of a multipart body and notes whether its
// closing delimiter ("--boundary--" at the start of a line) went by. A
// file whose bytes hold "\n--boundary--" (a bare LF, not the CRLF before
// a delimiter) can make a cut body look closed; only a body crafted so
// is affected, and a body short of its Content-Length is caught anyway.
type bodyCheck struct {
	r      io.Reader
	n      int64
	pat    []byte // "\n--boundary--"
	tail   []byte // the last len(pat)-1 bytes read, to match across reads
	seam   []byte // scratch: tail and the start of the next read
	closed bool
}

func newBodyCheck(r io.Reader, boundary string) *bodyCheck {
	pat := []byte("\n--" + boundary + "--")
	k := len(pat) - 1
	// The body's start counts as a line start. Both buffers are made
	// once: a read allocates nothing.
	return &bodyCheck{r: r, pat: pat, tail: append(make([]byte, 0, k), '\n'), seam: make([]byte, 0, 2*k)}
}

func (b *bodyCheck) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 && !b.closed {
		got, k := p[:n], len(b.pat)-1
		// A match straddling the previous read, then one inside this one.
		seam := append(append(b.seam[:0], b.tail...), got[:min(len(got), k)]...)
		b.closed = bytes.Contains(seam, b.pat) || bytes.Contains(got, b.pat)
		if len(got) >= k {
			b.tail = append(b.tail[:0], got[len(got)-k:]...)
		} else {
			b.tail = append(b.tail[:0], seam[max(0, len(seam)-k):]...)
		}
	}
	return n, err
}

// readPart appends at most limit+1 bytes of r to arena and returns the
// arena and the bytes read, as a slice of it that later appends cannot
// overwrite. It grows the arena only when the hint was short (a chunked
// body); slices handed out earlier keep the old array alive.
func readPart(arena []byte, r io.Reader, limit int64) ([]byte, []byte, error) {
	start := len(arena)
	lr := io.LimitReader(r, limit+1)
	for {
		if len(arena) == cap(arena) {
			arena = slices.Grow(arena, max(32<<10, len(arena)-start))
		}
		n, err := lr.Read(arena[len(arena):cap(arena)])
		arena = arena[:len(arena)+n]
		if err == io.EOF {
			return arena, arena[start:len(arena):len(arena)], nil
		}
		if err != nil {
			return arena, nil, err
		}
	}
}

// partDisposition reads a part's Content-Disposition: its field name, its
// raw file name (decoded from filename* when given) and whether it is a
// file at all (a file input left empty still sends filename=""). A header
// that does not parse is an error. A filename* in a charset Go cannot
// decode leaves the part a file, named "" (sanitized later to "file").
func partDisposition(p *multipart.Part) (field, filename string, isFile bool, err error) {
	cd := p.Header.Get("Content-Disposition")
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return "", "", false, err
	}
	filename, isFile = params["filename"]
	if !isFile && strings.Contains(strings.ToLower(cd), "filename") {
		isFile = true
	}
	return params["name"], filename, isFile, nil
}
