package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPackageInstalls: the browser client installs as its README says,
// from the tarball `npm pack` makes: the tarball holds the licence, the
// types and every module the entry point imports (followed through their
// relative imports), package.json declares the repository's licence,
// `npm i` of the tarball in an empty project works offline (the package
// has no runtime dependency), and what `import "@pendinguploads/client"`
// gives is exactly what pendinguploads.d.ts declares.
func TestPackageInstalls(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("package test: npm is missing (scripts/ensure-tools.sh installs it)")
		}
		t.Skip("package test: npm is missing (scripts/ensure-tools.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(dir string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return out
	}

	t.Run("Licence", func(t *testing.T) {
		var pkg struct{ License string }
		readJSON(t, filepath.Join("..", "package.json"), &pkg)
		if pkg.License != "Apache-2.0" {
			t.Errorf("package.json license: got %q, want Apache-2.0 (the repository's LICENSE)", pkg.License)
		}
		root, err := os.ReadFile(filepath.Join("..", "..", "..", "LICENSE"))
		if err != nil {
			t.Fatalf("the repository's LICENSE: %v", err)
		}
		own, err := os.ReadFile(filepath.Join("..", "LICENSE"))
		if err != nil || !bytes.Equal(own, root) {
			t.Errorf("clients/js/LICENSE is not the repository's LICENSE (npm packs the package's own folder): %v", err)
		}
	})

	dest := t.TempDir()
	var packed []struct {
		Filename string
		Files    []struct{ Path string }
	}
	if err := json.Unmarshal(run("..", npm, "pack", "--json", "--pack-destination", dest), &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v (%d packages)", err, len(packed))
	}
	var files []string
	for _, f := range packed[0].Files {
		files = append(files, f.Path)
	}
	t.Run("Contents", func(t *testing.T) {
		for _, want := range []string{"LICENSE", "README.md", "package.json", "pendinguploads.d.ts"} {
			if !slices.Contains(files, want) {
				t.Errorf("the tarball lacks %s: %v", want, files)
			}
		}
		importRE := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^"']*?from\s+["'](\./[^"']+)["']`)
		seen := map[string]bool{}
		queue := []string{"pendinguploads.js"}
		for len(queue) > 0 {
			mod := queue[0]
			queue = queue[1:]
			if seen[mod] {
				continue
			}
			seen[mod] = true
			if !slices.Contains(files, mod) {
				t.Errorf("the tarball lacks %s, which the entry point imports", mod)
				continue
			}
			src, err := os.ReadFile(filepath.Join("..", mod))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range importRE.FindAllStringSubmatch(string(src), -1) {
				queue = append(queue, filepath.Clean(m[1]))
			}
		}
	})

	consumer := t.TempDir()
	if err := os.WriteFile(filepath.Join(consumer, "package.json"), []byte(`{"name":"consumer","private":true,"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(consumer, npm, "install", "--offline", "--no-audit", "--no-fund", filepath.Join(dest, packed[0].Filename))
	t.Run("ExportsAsDeclared", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is missing")
		}
		out := run(consumer, node, "--input-type=module", "-e",
			`const m = await import("@pendinguploads/client"); console.log(Object.keys(m).sort().join(" "))`)
		got := strings.Fields(string(out))
		dts, err := os.ReadFile(filepath.Join("..", "pendinguploads.d.ts"))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, m := range regexp.MustCompile(`(?m)^export declare (?:const|function|class) (\w+)`).FindAllStringSubmatch(string(dts), -1) {
			if !slices.Contains(want, m[1]) {
				want = append(want, m[1])
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("import of the installed package: got %v, want what the .d.ts declares %v", got, want)
		}
	})
}

// TestPackageInstallsAsTheReadmeSays runs README.md's install lines, as
// written, with bash, beside a clean clone of this repository (its last
// commit: what a person who clones it today has) and an empty app, and
// then imports the package from the app: no tag, nothing of this
// checkout's node_modules.
func TestPackageInstallsAsTheReadmeSays(t *testing.T) {
	for _, bin := range []string{"npm", "node", "git", "bash"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("readme's install: %s is missing", bin)
			}
			t.Skipf("readme's install: %s is missing", bin)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Installing\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var lines string
	for _, b := range fencedBlocks(section) {
		if b.lang == "sh" {
			lines = b.text
		}
	}
	if lines == "" {
		t.Fatal("README.md's Installing shows no sh block")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sh := func(script string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	// A clean clone (--shared: the objects are borrowed, not copied), and
	// an app of the person's own.
	sh("git clone -q --shared '" + root + "' pendinguploads && mkdir your-app && " +
		`echo '{"name":"your-app","private":true,"type":"module"}' >your-app/package.json`)
	t.Logf("%s", sh(lines))
	var pkg struct{ Dependencies map[string]string }
	readJSON(t, filepath.Join(dir, "your-app", "package.json"), &pkg)
	if !strings.HasPrefix(pkg.Dependencies["@pendinguploads/client"], "file:vendor/") {
		t.Errorf("your-app/package.json: got dependencies %v, want @pendinguploads/client from file:vendor/…", pkg.Dependencies)
	}
	out := sh(`cd your-app && node --input-type=module -e 'const m = await import("@pendinguploads/client"); console.log(typeof m.uploadFiles, typeof m.pendingFile)'`)
	if strings.TrimSpace(out) != "function function" {
		t.Errorf("import from your-app: got %q, want uploadFiles and pendingFile functions", out)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
