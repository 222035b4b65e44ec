package pgtest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// shmDir is the tmpfs the throwaway cluster lives on when it has room.
const shmDir = "/dev/shm"

// tmpfsMagic is statfs's f_type for tmpfs (linux/magic.h TMPFS_MAGIC).
const tmpfsMagic = 0x01021994

// minShmFree is the room shmDir must have for a cluster to go there: a
// cluster is some 40 MB, each test's database 8 MB while the test runs,
// and several test binaries run at once. A container's default /dev/shm
// (64 MB) is too small, and the cluster goes to the temporary folder.
const minShmFree = 1 << 30

// clusterParent returns the folder the throwaway cluster's own folder is
// made in: shmDir when it is a tmpfs with minShmFree free, else "" (the
// system's temporary folder). On a disk, each test's CREATE DATABASE (a
// file copy and two checkpoints) and DROP DATABASE go through the file
// system: on this project's 2-core VM (ext4 mounted with discard) 30
// clones took 6 to 9 s and 22 s of the server's CPU; on tmpfs 1 to 2 s and
// 3.6 s. The cluster is throwaway (fsync off) either way: nothing is lost
// by keeping it in memory.
func clusterParent() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	if st.Bavail*uint64(st.Bsize) < minShmFree {
		return ""
	}
	removeStale(shmDir)
	return shmDir
}

// clusterPrefix names a cluster's folder: the prefix, then the pid of the
// test binary that made it, so that a later one can tell a folder left
// by a binary that was killed (SIGKILL runs no cleanup) and remove it:
// memory is not given back until it is.
const clusterPrefix = "pendinguploads-pg-"

// dirPattern is os.MkdirTemp's pattern for this process's cluster folder.
func dirPattern() string { return clusterPrefix + strconv.Itoa(os.Getpid()) + "-" }

// removeStale removes the cluster folders in dir whose test binary is no
// longer running. A folder whose pid is alive (or was reused by another
// process) is left: the failure is to keep one, never to remove one in use.
func removeStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), clusterPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// alive reports whether process pid exists (EPERM: it does, another
// user's).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
