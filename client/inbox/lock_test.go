package inbox

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestLockDir: while one holder has the lock a second is refused at once
// with ErrLocked, and once it lets go the lock can be taken again.
func TestLockDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lockDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: got %v, want ErrLocked", err)
	}
	unlock()
	again, err := lockDir(path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
