package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shellBuiltins are the commands a code block may call that every POSIX
// shell has.
var shellBuiltins = []string{"export", "cd", "echo", "set", "unset", "true", "false", "test", "["}

// TestDeployPrerequisites: deploy.md opens with one list of what a
// deployer needs, and every command its shell code blocks call is on it
// (a code span of one word in the list), or is a file of this repository
// (./scripts/deploy.sh), or a shell builtin; the list's Go version is the
// one go.mod requires.
func TestDeployPrerequisites(t *testing.T) {
	dir := root(t)
	b, err := os.ReadFile(filepath.Join(dir, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, found := strings.Cut(doc, "\n## Prerequisites\n")
	if !found {
		t.Fatal(`docs/deploy.md has no "## Prerequisites" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if first := strings.Index(doc, "\n## "); first != strings.Index(doc, "\n## Prerequisites\n") {
		t.Errorf("docs/deploy.md: Prerequisites is not its first section")
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^- `([a-z][a-z0-9-]*)`").FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
	}

	// The Go version: go.mod's go line.
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)$`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod: no go line")
	}
	if m := regexp.MustCompile(`Go (\d+\.\d+(?:\.\d+)?) or later`).FindStringSubmatch(section); m == nil || m[1] != string(goLine[1]) {
		t.Errorf("deploy.md's prerequisites say %q; go.mod requires go %s", m, goLine[1])
	}

	calls := shellCommands(t, doc)
	t.Logf("commands: %v", calls)
	if len(calls) == 0 {
		t.Fatal("docs/deploy.md: no command found in its sh code blocks")
	}
	for _, c := range calls {
		switch {
		case slices.Contains(shellBuiltins, c.name):
		case strings.HasPrefix(c.name, "./"):
			if _, err := os.Stat(filepath.Join(dir, c.name)); err != nil {
				t.Errorf("deploy.md line %d runs %s, which is not in the repository", c.line, c.name)
			}
		case !listed[c.name]:
			t.Errorf("deploy.md line %d runs %s, which its prerequisites do not list", c.line, c.name)
		}
	}
}

// shellCall is a command a code block runs, and its line in the file.
type shellCall struct {
	name string
	line int
}

// shellCommands returns every command the sh code blocks of a Markdown
// text run: the first word of each simple command (after its variable
// assignments), in pipelines, lists and command substitutions, with
// comments and line continuations taken out.
func shellCommands(t *testing.T, doc string) []shellCall {
	t.Helper()
	var out []shellCall
	inBlock := false
	var stmt strings.Builder
	stmtLine := 0
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if !inBlock && trimmed != "```sh" && trimmed != "```" {
				t.Fatalf("docs/deploy.md line %d: a code block that is not sh (%s): this test reads only sh", i+1, trimmed)
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		if stmt.Len() == 0 {
			stmtLine = i + 1
		}
		code := stripComment(trimmed)
		if cont, ok := strings.CutSuffix(code, "\\"); ok {
			stmt.WriteString(cont + " ")
			continue
		}
		stmt.WriteString(code)
		for _, name := range commandsOf(stmt.String()) {
			out = append(out, shellCall{name, stmtLine})
		}
		stmt.Reset()
	}
	return out
}

// stripComment takes a trailing comment off a line of shell: a # at the
// start of a word, outside quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

// commandsOf returns the commands one statement runs: each command
// substitution's, $(…), and those of the statement with its
// substitutions taken out, split at |, &&, || and ;.
func commandsOf(stmt string) []string {
	var out []string
	// Command substitutions, innermost first.
	sub := regexp.MustCompile(`\$\(([^()]*)\)`)
	for {
		m := sub.FindStringSubmatchIndex(stmt)
		if m == nil {
			break
		}
		out = append(out, commandsOf(stmt[m[2]:m[3]])...)
		stmt = stmt[:m[0]] + "SUBST" + stmt[m[1]:]
	}
	for _, part := range regexp.MustCompile(`\|\||&&|[|;]`).Split(quotesOut(stmt), -1) {
		for _, word := range strings.Fields(part) {
			if word == "export" {
				continue
			}
			if regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(word) {
				continue // an assignment, before the command (or export's)
			}
			out = append(out, word)
			break
		}
	}
	return out
}

// quotesOut replaces each quoted string by a word without spaces, so that
// the words of a command are its fields.
func quotesOut(s string) string {
	return regexp.MustCompile(`'[^']*'|"[^"]*"`).ReplaceAllString(s, "QUOTED")
}
