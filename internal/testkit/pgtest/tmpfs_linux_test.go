package pgtest

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestRemoveStale: a cluster folder left by a test binary that is gone is
// removed; one whose binary runs (this one, or another live process), and
// anything not named as a cluster folder, stays.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	gone := osexec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := gone.Process.Pid
	if alive(deadPid) {
		t.Skipf("pid %d was reused already", deadPid)
	}
	names := map[string]bool{ // name: removed
		clusterPrefix + strconv.Itoa(deadPid) + "-123":          true,
		clusterPrefix + strconv.Itoa(os.Getpid()) + "-456":      false,
		clusterPrefix + strconv.Itoa(os.Getppid()) + "-789":     false,
		clusterPrefix + "notapid-1":                             false,
		"other-" + strconv.Itoa(deadPid) + "-1":                 false,
		clusterPrefix + strconv.Itoa(deadPid) + "-file-not-dir": false,
	}
	for name := range names {
		p := filepath.Join(dir, name)
		var err error
		if name == clusterPrefix+strconv.Itoa(deadPid)+"-file-not-dir" {
			err = os.WriteFile(p, nil, 0o600)
		} else if err = os.Mkdir(p, 0o700); err == nil {
			err = os.WriteFile(filepath.Join(p, "PG_VERSION"), []byte("15\n"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	removeStale(dir)
	for name, removed := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := os.IsNotExist(err); got != removed {
			t.Errorf("%s: removed %v, want %v (stat: %v)", name, got, removed, err)
		}
	}
}

// TestClusterFolderNamesItsBinary: the folder pattern carries this
// process's pid, which removeStale reads back.
func TestClusterFolderNamesItsBinary(t *testing.T) {
	d, err := os.MkdirTemp(t.TempDir(), dirPattern())
	if err != nil {
		t.Fatal(err)
	}
	want := clusterPrefix + strconv.Itoa(os.Getpid()) + "-"
	if base := filepath.Base(d); len(base) <= len(want) || base[:len(want)] != want {
		t.Fatalf("folder %s does not start with %s", base, want)
	}
}
