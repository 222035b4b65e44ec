package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fencedBlock is a fenced code block of a Markdown file: its language and
// text, and its first line.
type fencedBlock struct {
	lang, text string
	line       int
}

var fenceOpen = regexp.MustCompile("^```(\\w*)\\s*$")

// fencedBlocks returns the fenced code blocks of a Markdown text.
func fencedBlocks(text string) []fencedBlock {
	var out []fencedBlock
	var cur *fencedBlock
	var body []string
	for i, l := range strings.Split(text, "\n") {
		switch {
		case cur == nil:
			if m := fenceOpen.FindStringSubmatch(l); m != nil {
				cur, body = &fencedBlock{lang: m[1], line: i + 1}, nil
			}
		case strings.TrimSpace(l) == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		default:
			body = append(body, l)
		}
	}
	return out
}

// TestDocsCodeBlocks: every JavaScript and TypeScript block of
// docs/clients.md and clients/js/README.md type-checks as pasted, each a
// module of its own, with tsc (pinned in package.json), in strict mode,
// against the client's pendinguploads.d.ts (as "@pendinguploads/client")
// and the canvas's names the drop-ins use (testdata/canvas/canvas-names.d.ts),
// with node's types (@types/node, pinned) for the node block:
// a block that calls what neither declares (the drop-in's pendingFile,
// once only in a test's fixture) fails here. The other blocks are held
// where they run: the Go program by internal/docstest's
// TestGoClientProgram, the install lines by TestPackageInstalls; shell
// lines of pendingctl and make are the commands' own tests'.
func TestDocsCodeBlocks(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("docs' code blocks: node is missing (scripts/ensure-tools.sh installs it)")
		}
		t.Skip("docs' code blocks: node is missing (scripts/ensure-tools.sh installs it)")
	}
	tsc, err := filepath.Abs(filepath.Join("..", "node_modules", "typescript", "bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("..", "node_modules", "@types", "node", "package.json")); err != nil {
		tsc = "" // npm ci predates @types/node
	}
	if _, err := os.Stat(tsc); err != nil {
		msg := "docs' code blocks: clients/js/node_modules/typescript or @types/node is missing (npm ci; scripts/ensure-tools.sh runs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	typeRoots, err := filepath.Abs(filepath.Join("..", "node_modules", "@types"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := filepath.Abs(filepath.Join("..", "pendinguploads.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	canvas, err := filepath.Abs(filepath.Join("testdata", "canvas", "canvas-names.d.ts"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	files := []string{canvas}
	where := map[string]string{} // the file written: the block's place
	checked := map[string]int{}
	for name, doc := range map[string]string{
		"docs/clients.md":      filepath.Join("..", "..", "..", "docs", "clients.md"),
		"clients/js/README.md": filepath.Join("..", "README.md"),
	} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, blk := range fencedBlocks(string(b)) {
			ext := map[string]string{"js": ".js", "ts": ".ts"}[blk.lang]
			switch {
			case ext != "":
			case blk.lang == "sh" || blk.lang == "go":
				continue
			default:
				t.Errorf("%s:%d: a block in %q: neither type-checked here nor held elsewhere (js, ts, sh, go)", name, blk.line, blk.lang)
				continue
			}
			f := filepath.Join(dir, fmt.Sprintf("block%d%s", len(files), ext))
			if err := os.WriteFile(f, []byte(blk.text), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			where[filepath.Base(f)] = fmt.Sprintf("%s:%d", name, blk.line)
			checked[name]++
		}
	}
	for _, name := range []string{"docs/clients.md", "clients/js/README.md"} {
		if checked[name] == 0 {
			t.Errorf("%s: no js or ts block found: is the fence pattern broken?", name)
		}
	}
	config := map[string]any{
		"compilerOptions": map[string]any{
			"strict": true, "noEmit": true, "allowJs": true, "checkJs": true,
			"target": "es2022", "module": "esnext", "moduleResolution": "bundler",
			"lib": []string{"es2022", "dom", "dom.iterable"},
			// node's, from the pinned @types/node: README's node block.
			"types":     []string{"node"},
			"typeRoots": []string{typeRoots},
			"paths":     map[string][]string{"@pendinguploads/client": {client}},
		},
		"files": files,
	}
	b, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, tsc, "-p", filepath.Join(dir, "tsconfig.json"), "--pretty", "false")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		// Name each error by its block's place in the docs.
		text := string(out)
		for f, at := range where {
			text = strings.ReplaceAll(text, f, f+" ("+at+")")
		}
		t.Fatalf("tsc: the docs' code blocks do not type-check as pasted: %v\n%s", err, text)
	}
	t.Logf("type-checked %v blocks", checked)
}
