package docstest

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryModuleIsLicensed: the repository is Apache-2.0, and so is every
// module a user can take from it alone: each folder with a go.mod or a
// package.json holds the repository's LICENSE (a Go module or an npm
// tarball carries only its own folder), and each package.json says
// "Apache-2.0".
func TestEveryModuleIsLicensed(t *testing.T) {
	dir := root(t)
	licence, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
	if err != nil {
		t.Fatalf("the repository has no LICENSE: %v", err)
	}
	if !bytes.Contains(licence, []byte("Apache License")) || !bytes.Contains(licence, []byte("Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License, Version 2.0")
	}
	modules := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || (d.Name() != "go.mod" && d.Name() != "package.json") {
			return nil
		}
		if strings.Contains(filepath.ToSlash(path), "/testdata/") {
			return nil
		}
		modules++
		rel, _ := filepath.Rel(dir, path)
		own, err := os.ReadFile(filepath.Join(filepath.Dir(path), "LICENSE"))
		if err != nil || !bytes.Equal(own, licence) {
			t.Errorf("%s: its folder does not hold the repository's LICENSE (%v)", rel, err)
		}
		if d.Name() == "package.json" {
			var pkg struct{ License string }
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &pkg); err != nil {
				t.Errorf("%s: %v", rel, err)
			} else if pkg.License != "Apache-2.0" {
				t.Errorf("%s: license %q, want Apache-2.0", rel, pkg.License)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if modules < 2 {
		t.Errorf("found %d modules (go.mod, package.json); the walk is wrong", modules)
	}
}
