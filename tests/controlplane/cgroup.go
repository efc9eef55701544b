package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// cgroupHierarchies returns the mount points of every cgroup hierarchy (v1
// controllers, named ones, a v2 mount).
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && (fields[2] == "cgroup" || fields[2] == "cgroup2") {
			dirs = append(dirs, fields[1])
		}
	}
	if len(dirs) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return dirs, sc.Err()
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy; in
// the cpuset one it starts with its parent's CPUs and memory nodes (an
// empty cpuset takes no tasks).
func makeCgroupRoot(name string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("creating the node's cgroup: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			val, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), val, 0o644); err != nil {
				return fmt.Errorf("setting %s of the node's cgroup: %w", f, err)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the cgroup root and everything the kubelet and
// runc made under it, in every hierarchy, deepest first. The processes of
// the node are killed when its PID namespace ends but leave their cgroups a
// moment later, so a busy cgroup is tried again until timeout.
func removeCgroupRoot(name string, timeout time.Duration) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, h := range dirs {
		root := filepath.Join(h, name)
		for {
			err := removeTree(root)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the node's cgroup %s is still busy after %s: %w", root, timeout, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// removeTree rmdirs dir and the directories below it, deepest first; a
// cgroup directory holds only its control files, which go with it.
func removeTree(dir string) error {
	var subdirs []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			subdirs = append(subdirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(subdirs, func(i, j int) bool { return len(subdirs[i]) > len(subdirs[j]) })
	for _, d := range subdirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	return nil
}

// nodeCgroupRoots names every node cgroup root (kubelease-node-*) in any
// hierarchy, of live nodes and of killed ones.
func nodeCgroupRoots() ([]string, error) {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, h := range dirs {
		m, _ := filepath.Glob(filepath.Join(h, "kubelease-node-*"))
		for _, p := range m {
			seen["/"+filepath.Base(p)] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
