package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// node-init is the first process of the node's namespaces (PID 1 of its PID
// namespace). It only reaps: it starts node-supervise, which sets the node
// up and runs the components, collects every orphan that the components'
// double forks leave it (containerd's shims), forwards SIGTERM, SIGINT, SIGUSR1 and SIGUSR2,
// and exits with node-supervise's status. When it exits, the kernel kills
// every process left in the namespace, so nothing of the node outlives it.
func nodeInit(specPath string) int {
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	self, err := os.Executable()
	if err != nil {
		logf("node-init: %v", err)
		return 1
	}
	// fd 3 (the report pipe) goes on to node-supervise as its fd 3.
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "report")}
	sup, err := os.StartProcess(self, []string{"controlplane", "node-supervise", specPath},
		&os.ProcAttr{Files: files, Env: os.Environ()})
	if err != nil {
		logf("node-init: starting node-supervise: %v", err)
		return 1
	}
	files[3].Close()
	go func() {
		for s := range sigc {
			_ = sup.Signal(s)
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			logf("node-init: wait: %v", err)
			return 1
		}
		if pid == sup.Pid {
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// supervisor runs the node's components inside its namespaces.
type supervisor struct {
	spec  nodeSpec
	d     nodePaths
	procs []*proc // in start order; stopped in reverse
	ctx   context.Context
}

// nodeSupervise sets up the namespaces' mounts and network, starts the
// components one after the other, each once the one before is ready, reports
// "ready" (or "error: ...") on fd 3, then waits for SIGTERM or SIGINT and
// stops them in reverse order. Once ready, SIGUSR1 restarts the kubelet and
// SIGUSR2 containerd (stopped with SIGTERM, started again with the same
// arguments; the Pods' containers and shims keep running), as a node's
// service manager does: tests fault the node with them.
func nodeSupervise(specPath string) int {
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	restartc := make(chan os.Signal, 4)
	signal.Notify(restartc, syscall.SIGUSR1, syscall.SIGUSR2)
	// The components must not inherit the report pipe, or it would stay open
	// after the report.
	syscall.CloseOnExec(3)
	report := os.NewFile(3, "report")
	s := &supervisor{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.ctx = ctx
	go func() {
		<-sigc
		cancel()
	}()
	err := s.load(specPath)
	if err == nil {
		err = s.up()
	}
	if err != nil {
		fmt.Fprintf(report, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		report.Close()
		s.down()
		return 1
	}
	fmt.Fprintln(report, "ready")
	report.Close()
	for {
		select {
		case <-ctx.Done():
			s.down()
			return 0
		case sig := <-restartc:
			name := "kubelet"
			if sig == syscall.SIGUSR2 {
				name = "containerd"
			}
			s.restart(name)
		}
	}
}

// restart stops the component name and starts it again, waiting until it
// is ready as at bring-up (the kubelet: until its healthz answers). Its log
// gets a new "==== controlplane: starting" line; the outcome goes to
// node-supervise's log.
func (s *supervisor) restart(name string) {
	for _, p := range s.procs {
		if p.name != name {
			continue
		}
		t := time.Now()
		p.stop(syscall.SIGTERM, stopGrace)
		err := p.start()
		if err == nil {
			err = waitReady(s.ctx, p, s.timeout(), s.ready(name))
		}
		if err != nil {
			logf("node: restarting %s: %v", name, err)
			return
		}
		logf("node: %s restarted in %.1fs", name, time.Since(t).Seconds())
		return
	}
	logf("node: no component %s to restart", name)
}

// ready is the readiness check restart waits on for component name.
func (s *supervisor) ready(name string) func() bool {
	if name == "containerd" {
		return s.containerdReady
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	return func() bool { return probe(plain, "http://127.0.0.1:10248/healthz", "") }
}

func (s *supervisor) load(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &s.spec); err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	s.d = nodePaths(s.spec.StateDir)
	return nil
}

func (s *supervisor) timeout() time.Duration { return time.Duration(s.spec.TimeoutSec) * time.Second }

func (s *supervisor) bin(name string) string { return filepath.Join(s.spec.BinDir, name+".current") }

// start launches a component and waits until ready (nil: no wait) holds.
func (s *supervisor) start(name, bin string, args []string, ready func() bool) error {
	p := &proc{name: name, bin: bin, args: args, logPath: s.d.log(name)}
	if err := p.start(); err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	if ready == nil {
		p.setUp()
		return nil
	}
	return waitReady(s.ctx, p, s.timeout(), ready)
}

func (s *supervisor) up() error {
	t0 := time.Now()
	if err := s.setupMounts(); err != nil {
		return fmt.Errorf("setting up the node's mounts: %w", err)
	}
	if err := s.setupNetwork(); err != nil {
		return fmt.Errorf("setting up the node's network: %w", err)
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"etcd", s.startEtcd},
		{"kube-apiserver", s.startAPIServer},
		{"controllers", s.startControllers},
		{"containerd", s.startContainerd},
		{"images", s.importImages},
		{"kubelet", s.startKubelet},
		{"kube-proxy", s.startKubeProxy},
	}
	for _, st := range steps {
		t := time.Now()
		if err := st.fn(); err != nil {
			return err
		}
		verbosef("node: %s ready in %.1fs", st.name, time.Since(t).Seconds())
	}
	verbosef("node: up in %.1fs", time.Since(t0).Seconds())
	return nil
}

// down stops the components in reverse order. Pods and their shims stay
// until node-init exits and the kernel ends the namespace.
func (s *supervisor) down() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop(syscall.SIGTERM, stopGrace)
	}
}

// The kernel settings the kubelet insists on (protectKernelDefaults): the
// node shows it files holding those values in place of the machine's own,
// so the kubelet neither refuses to start nor changes the machine.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// setupMounts: the namespace's mounts stay in it (every mount private); a
// /proc of the new PID namespace; the kubelet's sysctl values; a /run of its
// own (containerd's shim sockets, the Pods' network namespaces); /var as an
// overlay whose writes land in the state directory (the kubelet writes
// /var/log/containers, the CNI plugins /var/lib/cni).
func (s *supervisor) setupMounts() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	sysctlDir := s.d.dir("node", "sysctl")
	if err := os.MkdirAll(sysctlDir, 0o755); err != nil {
		return err
	}
	for key, val := range kubeletSysctls {
		f := filepath.Join(sysctlDir, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(f, []byte(val+"\n"), 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(f, "/proc/sys/"+key, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting over /proc/sys/%s: %w", key, err)
		}
	}
	if err := syscall.Mount("tmpfs", "/run", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755"); err != nil {
		return fmt.Errorf("mounting /run: %w", err)
	}
	upper, work := s.d.dir("node", "var", "upper"), s.d.dir("node", "var", "work")
	for _, dir := range []string{upper, work} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := syscall.Mount("overlay", "/var", "overlay", 0,
		"lowerdir=/var,upperdir="+upper+",workdir="+work); err != nil {
		return fmt.Errorf("mounting the overlay on /var: %w", err)
	}
	return syscall.Sethostname([]byte(nodeName))
}

// setupNetwork: the loopback device up with the node's address, forwarding
// on (for the Pods' bridge), bridged traffic through iptables (kube-proxy's
// rules see Pod-to-Pod packets through a Service). The namespace has no
// default route; the Service range is routed to the loopback device so that
// a connection from the node itself to a ClusterIP gets past the first route
// lookup to kube-proxy's DNAT (an address no rule takes goes nowhere).
func (s *supervisor) setupNetwork() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", nodeIP + "/32", "dev", "lo"},
		{"route", "add", serviceCIDR, "dev", "lo", "src", nodeIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for key, val := range map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile("/proc/sys/"+key, []byte(val), 0o644); err != nil {
			return fmt.Errorf("setting %s in the node's network namespace: %w", key, err)
		}
	}
	return nil
}

func (s *supervisor) startEtcd() error {
	dataDir := s.d.dir("node", "etcd-data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	url := "http://127.0.0.1:2379"
	peer := "http://127.0.0.1:2380"
	plain := &http.Client{Timeout: 2 * time.Second}
	return s.start("etcd", s.bin("etcd"), []string{
		"--name=kubelease-node",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + url,
		"--advertise-client-urls=" + url,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=kubelease-node=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
		"--quota-backend-bytes=1073741824",
	}, func() bool { return probe(plain, url+"/health", `"health":"true"`) })
}

// adminClient is an HTTPS client inside the node with the admin certificate.
func (s *supervisor) adminClient() (*http.Client, error) {
	p, err := readPKI(s.d.dir("pki"))
	if err != nil {
		return nil, err
	}
	return p.client(true, "")
}

func (s *supervisor) startAPIServer() error {
	pk := s.d.pki
	args := []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		"--advertise-address=" + nodeIP,
		fmt.Sprintf("--secure-port=%d", apiPortNode),
		"--tls-cert-file=" + pk("apiserver.crt"),
		"--tls-private-key-file=" + pk("apiserver.key"),
		"--client-ca-file=" + pk("ca.crt"),
		"--kubelet-client-certificate=" + pk("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pk("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + pk("sa.pub"),
		"--service-account-signing-key-file=" + pk("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir=" + s.d.dir("pki"),
		// As in the loopback control plane (cluster.go): Leases keep
		// spec.preferredHolder and spec.strategy.
		"--feature-gates=CoordinatedLeaderElection=true",
		"--runtime-config=coordination.k8s.io/v1beta1=true",
	}
	admin, err := s.adminClient()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPortNode)
	if err := s.start("kube-apiserver", s.bin("kube-apiserver"), args, func() bool { return probe(admin, url, "ok") }); err != nil {
		return err
	}
	// The way in for the harness (forward.go); it lives as long as this process.
	_, err = newForwarder("unix", s.d.apiSock(), "tcp", fmt.Sprintf("127.0.0.1:%d", apiPortNode))
	return err
}

// startControllers starts the controller manager and the scheduler; the
// harness waits for their work (the node's ServiceAccount, its CA
// ConfigMap) through the API.
func (s *supervisor) startControllers() error {
	if err := s.start("kube-controller-manager", s.bin("kube-controller-manager"), append(s.controllerFlags("kube-controller-manager"),
		"--use-service-account-credentials=true",
		"--root-ca-file="+s.d.pki("ca.crt"),
		"--service-account-private-key-file="+s.d.pki("sa.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--cluster-cidr="+podCIDR,
		"--allocate-node-cidrs=false",
		"--controllers=*,-nodeipam",
		// Not the machine's /usr/libexec/kubernetes, which it would create.
		"--flex-volume-plugin-dir="+s.d.dir("node", "volume-plugins"),
	), nil); err != nil {
		return err
	}
	return s.start("kube-scheduler", s.bin("kube-scheduler"), s.controllerFlags("kube-scheduler"), nil)
}

// controllerFlags: the flags the controller manager and the scheduler share —
// their kubeconfig for the API and for delegated authentication and
// authorization, loopback only, no leader election (there is one of each).
func (s *supervisor) controllerFlags(user string) []string {
	kc := s.d.kubeconfig(user)
	return []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false"}
}

func (s *supervisor) startContainerd() error {
	return s.start("containerd", "containerd", []string{"--config", s.d.conf("containerd.toml")}, s.containerdReady)
}

// containerdReady: containerd's socket accepts connections.
func (s *supervisor) containerdReady() bool {
	c, err := net.DialTimeout("unix", s.d.containerdSock(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// importImages loads the image archives into containerd's k8s.io namespace,
// where the CRI plugin finds them.
func (s *supervisor) importImages() error {
	for _, img := range s.spec.Images {
		t := time.Now()
		cmd := exec.CommandContext(s.ctx, "ctr", "--address", s.d.containerdSock(), "--namespace", "k8s.io",
			"images", "import", img)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s into containerd: %v: %s", img, err, out)
		}
		verbosef("node: imported %s in %.1fs", filepath.Base(img), time.Since(t).Seconds())
	}
	return nil
}

func (s *supervisor) startKubelet() error {
	return s.start("kubelet", s.bin("kubelet"), []string{
		"--config=" + s.d.conf("kubelet.yaml"),
		"--kubeconfig=" + s.d.kubeconfig("kubelet"),
		"--root-dir=" + s.d.dir("node", "kubelet"),
		"--hostname-override=" + nodeName,
		"--node-ip=" + nodeIP,
	}, nil)
}

func (s *supervisor) startKubeProxy() error {
	plain := &http.Client{Timeout: 2 * time.Second}
	return s.start("kube-proxy", s.bin("kube-proxy"), []string{
		"--config=" + s.d.conf("kube-proxy.yaml"),
	}, func() bool { return probe(plain, "http://127.0.0.1:10256/healthz", "") })
}
