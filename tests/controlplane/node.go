package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// node is a one-node cluster in namespaces of its own: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd, the
// kubelet and kube-proxy run in a new network, mount, PID and UTS namespace,
// started by node-init (nodeinit.go) as the first process there. This side,
// in the machine's namespaces, writes the configuration, starts node-init,
// forwards a loopback port to the apiserver inside, waits through the API
// until the node can run Pods, and tears everything down.
type node struct {
	d          nodePaths
	binDir     string
	images     []string
	timeout    time.Duration
	cgroupRoot string

	pki      *pki
	init     *exec.Cmd
	initDone chan struct{} // closed when node-init has exited
	fwd      *forwarder
	admin    *http.Client
	lockFile *os.File
}

// nodeTools are the programs of the machine the node runs (scripts/setup.sh
// installs them).
var nodeTools = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "iptables",
	"iptables-restore", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"}

func (n *node) check() error {
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if fi, err := os.Stat(filepath.Join(n.binDir, c+".current")); err != nil || fi.Mode()&0o111 == 0 {
			return binaryError(fmt.Sprintf("%s not found in %s (build it with scripts/build-control-plane.sh --node)", c, n.binDir))
		}
	}
	for _, t := range nodeTools {
		if _, err := exec.LookPath(t); err != nil {
			return binaryError(fmt.Sprintf("%s is not installed (scripts/setup.sh --test installs it)", t))
		}
	}
	for _, img := range n.images {
		if _, err := os.Stat(img); err != nil {
			return binaryError(fmt.Sprintf("image archive %s: %v", img, err))
		}
	}
	if os.Geteuid() != 0 {
		return binaryError("the node needs root (namespaces, mounts, cgroups)")
	}
	return nil
}

// lock holds the state directory's lock while the harness runs, so that
// `controlplane clean` tells a live node's directory from a killed one's.
func (n *node) lock() error {
	if err := os.MkdirAll(n.d.dir("node"), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(n.d.conf("lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("the state directory %s is in use by another node", string(n.d))
	}
	n.lockFile = f // held until the process exits
	return nil
}

func (n *node) up(ctx context.Context) error {
	if err := n.lock(); err != nil {
		return err
	}
	var err error
	if n.pki, err = newPKI(net.ParseIP(nodeIP)); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	// spec.json names the cgroup root before it exists, so that `clean` knows
	// it is this live node's.
	root := "/kubelease-node-" + hex.EncodeToString(id)
	spec := nodeSpec{StateDir: string(n.d), BinDir: n.binDir, Images: n.images,
		CgroupRoot: root, TimeoutSec: int(n.timeout / time.Second)}
	if err := writeNodeConfig(n.d, n.pki, spec); err != nil {
		return err
	}
	n.cgroupRoot = root
	if err := makeCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	t0 := time.Now()
	if err := n.startInit(ctx); err != nil {
		return err
	}
	verbosef("node: components up in %.1fs", time.Since(t0).Seconds())
	if n.fwd, err = newForwarder("tcp", "127.0.0.1:0", "unix", n.d.apiSock()); err != nil {
		return err
	}
	if n.admin, err = n.pki.client(true, ""); err != nil {
		return err
	}
	t1 := time.Now()
	if err := n.waitSchedulable(ctx); err != nil {
		return err
	}
	verbosef("node: Ready and serving Pods after %.1fs more", time.Since(t1).Seconds())
	return nil
}

// startInit starts node-init in new namespaces and waits for its report.
func (n *node) startInit(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(n.d.log("node-init"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(self, "node-init", n.d.conf("spec.json"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if quiet {
		cmd.Env = append(os.Environ(), "KL_NODE_QUIET=1")
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting node-init in new namespaces: %w", err)
	}
	w.Close()
	n.init = cmd
	n.initDone = make(chan struct{})
	go func() {
		cmd.Wait()
		close(n.initDone)
	}()
	report := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(r)
		report <- strings.TrimSpace(string(data))
	}()
	select {
	case line := <-report:
		if line == "ready" {
			return nil
		}
		if line == "" {
			line = "node-init exited without a report"
		}
		return fmt.Errorf("the node did not come up: %s (logs in %s)", line, string(n.d))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSchedulable waits through the API until a Pod can run in the default
// namespace: the Node Ready, the ServiceAccount default (the controller
// manager makes it) and the ConfigMap kube-root-ca.crt that every
// ServiceAccount token volume projects.
func (n *node) waitSchedulable(ctx context.Context) error {
	checks := []struct {
		what string
		path string
		ok   func([]byte) bool
	}{
		{"the Node " + nodeName + " Ready", "/api/v1/nodes/" + nodeName, nodeReady},
		{"the ServiceAccount default/default", "/api/v1/namespaces/default/serviceaccounts/default", nil},
		{"the ConfigMap default/kube-root-ca.crt", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt", nil},
	}
	for _, c := range checks {
		if err := n.waitGet(ctx, c.what, c.path, c.ok); err != nil {
			return err
		}
	}
	return nil
}

func nodeReady(body []byte) bool {
	var nd struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &nd) != nil {
		return false
	}
	for _, c := range nd.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// waitGet polls GET path as admin until it answers 200 and ok (nil: any
// body) holds, node-init exits, ctx ends or the timeout passes.
func (n *node) waitGet(ctx context.Context, what, path string, ok func([]byte) bool) error {
	deadline := time.Now().Add(n.timeout)
	last := ""
	for {
		resp, err := n.admin.Get(n.apiURL() + path)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && (ok == nil || ok(body)) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s (last answer: %s; logs in %s)", n.timeout, what, last, string(n.d))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.initDone:
			return fmt.Errorf("node-init exited while waiting for %s (see %s)", what, n.d.log("node-init"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *node) apiURL() string { return "https://" + n.fwd.addr() }

// down stops node-init (SIGTERM: node-supervise stops the components in
// reverse order; SIGKILL after 30 s), which ends the namespaces and every
// process in them; then removes the kubelet's cgroups.
func (n *node) down() {
	if n.fwd != nil {
		n.fwd.close()
	}
	if n.init != nil {
		_ = n.init.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.initDone:
		case <-time.After(30 * time.Second):
			logf("node-init did not stop within 30s; killing it")
			_ = n.init.Process.Kill()
			<-n.initDone
		}
	}
	if n.cgroupRoot != "" {
		if err := removeCgroupRoot(n.cgroupRoot, 30*time.Second); err != nil {
			logf("warning: %v", err)
		}
	}
}

// writeNodeState writes the admin kubeconfig for the forwarded port and the
// env file (README.md, "The node"), last.
func (n *node) writeNodeState(binDir string) error {
	url := "https://" + n.fwd.addr()
	admin := kubeconfigText(url, n.pki.caCert, n.pki.adminCert, n.pki.adminKey, "admin")
	if err := writeFile(n.d.dir("admin.kubeconfig"), []byte(admin), 0o600); err != nil {
		return err
	}
	pid := n.init.Process.Pid
	vars := [][2]string{
		{"KL_APISERVER_URL", url},
		{"KL_ADMIN_KUBECONFIG", n.d.dir("admin.kubeconfig")},
		{"KL_NODE_NAME", nodeName},
		{"KL_NODE_IP", nodeIP},
		{"KL_NODE_PID", fmt.Sprint(pid)},
		{"KL_NODE_NETNS", fmt.Sprintf("/proc/%d/ns/net", pid)},
		{"KL_CONTAINERD_SOCK", n.d.containerdSock()},
		{"KL_POD_CIDR", podCIDR},
		{"KL_SERVICE_CIDR", serviceCIDR},
		{"KL_IMAGES", strings.Join(n.images, " ")},
		{"KL_BIN_DIR", binDir},
		{"KL_STATE_DIR", string(n.d)},
	}
	var b strings.Builder
	b.WriteString("# Written by tests/controlplane (node mode); see its README.md. Shell-sourceable.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], shellQuote(v[1]))
	}
	return writeFile(n.d.dir("env"), []byte(b.String()), 0o644)
}

// nodeDirs sorts the state directories of node runs in dir (kubelease-node*,
// with a lock file) into those of killed runs (the lock is free) and the
// cgroup roots of live ones (from their spec.json).
func nodeDirs(dir string) (stale []string, liveRoots map[string]bool) {
	liveRoots = map[string]bool{}
	m, _ := filepath.Glob(filepath.Join(dir, "kubelease-node*"))
	for _, d := range m {
		f, err := os.OpenFile(filepath.Join(d, "node", "lock"), os.O_RDWR, 0)
		if err != nil {
			continue // not a node's, or one starting this moment (no cgroups yet)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			stale = append(stale, d)
		} else if data, err := os.ReadFile(filepath.Join(d, "node", "spec.json")); err == nil {
			var spec nodeSpec
			if json.Unmarshal(data, &spec) == nil {
				liveRoots[spec.CgroupRoot] = true
			}
		}
		f.Close()
	}
	return stale, liveRoots
}

// nodeQuiet: node-init and node-supervise print only errors (-q).
func nodeQuiet() bool { return os.Getenv("KL_NODE_QUIET") == "1" }
