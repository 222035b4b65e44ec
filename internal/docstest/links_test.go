package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// documents are the Markdown files whose links are held: README.md, the
// files of docs/, and the READMEs beside the code.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, p := range []string{"clients/js/README.md", "events/README.md"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			docs = append(docs, filepath.Join(root, p))
		}
	}
	return docs
}

var (
	// inlineLink is a Markdown link or image, [text](target), outside code.
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^\\s*```")
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// links returns the link targets of a Markdown text, with their lines,
// leaving out fenced code blocks and code spans.
func links(text string) map[string][]int {
	out := map[string][]int{}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		// A code span inside link text ([`x`](y)) keeps its link.
		line = codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat("x", len(s)) })
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out[m[1]] = append(out[m[1]], i+1)
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// text: lower case, punctuation dropped, spaces as hyphens, a repeated
// one numbered (-1, -2, …).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks: every link of the documentation is relative, stays inside
// the repository, and names a file or directory that exists; its
// #anchor, if any, is a heading of the Markdown file it names.
func TestLinks(t *testing.T) {
	root := root(t)
	checked := 0
	for _, doc := range documents(t, root) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for target, lines := range links(string(b)) {
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			switch {
			case strings.Contains(path, "://") || strings.HasPrefix(path, "mailto:"):
				t.Errorf("%s:%v: %s: links only to files of the repository, relative", rel, lines, target)
				continue
			case strings.HasPrefix(path, "/"):
				t.Errorf("%s:%v: %s: an absolute path; want one relative to %s", rel, lines, target, filepath.Dir(rel))
				continue
			}
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), filepath.FromSlash(path))
				if r, err := filepath.Rel(root, file); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s:%v: %s: outside the repository", rel, lines, target)
					continue
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%v: %s: no such file or directory", rel, lines, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%v: %s: an anchor into a file that is not Markdown", rel, lines, target)
				continue
			}
			text, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s:%v: %s: %v", rel, lines, target, err)
				continue
			}
			if !anchors(string(text))[anchor] {
				t.Errorf("%s:%v: %s: no heading #%s there", rel, lines, target, anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d links; the documents link far more: is the link pattern broken?", checked)
	}
}

// TestAnchorsAndLinksParse: the two parsers on known text.
func TestAnchorsAndLinksParse(t *testing.T) {
	a := anchors("# Deploying\n## Beside the platform, or alone\n### `sam local invoke`\n```\n# not a heading\n```\n## Notes\n## Notes\n")
	for _, want := range []string{"deploying", "beside-the-platform-or-alone", "sam-local-invoke", "notes", "notes-1"} {
		if !a[want] {
			t.Errorf("anchors: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("anchors: a fenced line counted as a heading")
	}
	l := links("see [a](docs/a.md#x) and [`b`](../b.go)\n```\n[c](nope.md)\n```\n`[d](code.md)`\n")
	if len(l) != 2 || l["docs/a.md#x"] == nil || l["../b.go"] == nil {
		t.Errorf("links: got %v, want docs/a.md#x and ../b.go", l)
	}
}
