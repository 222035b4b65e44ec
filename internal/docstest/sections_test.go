package docstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sectionRef is a comment's pointer into the documentation: a Markdown
// file and a section's title in quotes, `docs/deploy.md, "Deploy with SAM"`.
var sectionRef = regexp.MustCompile(`([\w./-]+\.md),\s+"([^"]+)"`)

// commentLine is a line of a comment in Go, JS, YAML, TOML, make or sh.
var commentLine = regexp.MustCompile(`^\s*(?://|#|/?\*+)\s?(.*)$`)

// sectionTitles returns the titles a reference may name in a Markdown
// text, lower case: its headings (code marks dropped) and the bold
// labels that open a paragraph (**Connection arithmetic.**).
func sectionTitles(text string) map[string]bool {
	out := map[string]bool{}
	label := regexp.MustCompile(`^\*\*([^*]+?)\.?\*\*`)
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		switch {
		case inFence:
		case strings.HasPrefix(line, "#"):
			out[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(strings.TrimLeft(line, "#")), "`", ""))] = true
		default:
			if m := label.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				out[strings.ToLower(strings.ReplaceAll(m[1], "`", ""))] = true
			}
		}
	}
	return out
}

// TestCommentSections: a comment of the code or the configuration that
// sends the reader to a section of the documentation (samconfig.toml's
// `docs/deploy.md, "Deploy with SAM"`) names a file that exists and a
// section it has, so that a section moved or renamed does not leave a
// pointer to nowhere. The file is read beside the comment's, else at the
// repository's root.
func TestCommentSections(t *testing.T) {
	root := root(t)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".js", ".ts", ".yaml", ".toml", ".mk", ".sh":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		// Each comment's lines joined: a reference may wrap.
		var comment []string
		check := func() {
			text := strings.Join(comment, " ")
			comment = comment[:0]
			for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
				checked++
				doc := filepath.Join(filepath.Dir(path), filepath.FromSlash(m[1]))
				md, err := os.ReadFile(doc)
				if err != nil {
					doc = filepath.Join(root, filepath.FromSlash(m[1]))
					if md, err = os.ReadFile(doc); err != nil {
						t.Errorf("%s: %s, %q: no such file", rel, m[1], m[2])
						continue
					}
				}
				if !sectionTitles(string(md))[strings.ToLower(strings.ReplaceAll(m[2], "`", ""))] {
					t.Errorf("%s: %s has no section %q (a heading, or a paragraph's bold label)", rel, m[1], m[2])
				}
			}
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := commentLine.FindStringSubmatch(line); m != nil {
				comment = append(comment, m[1])
				continue
			}
			check()
		}
		check()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Errorf("checked %d references; the code makes more: is the pattern broken?", checked)
	}
}
