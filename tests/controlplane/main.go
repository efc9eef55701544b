// Command controlplane runs a real etcd and kube-apiserver on loopback for
// kubelease's integration tests, in the manner of controller-runtime's
// envtest: generated PKI, RBAC, a ServiceAccount limited to Leases in one
// namespace. See README.md for the usage and the state-directory contract.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

const usage = `usage:
  controlplane run   [flags] -- CMD [ARGS...]   start, run CMD with KUBELEASE_TEST_ENV=DIR, stop; exit with CMD's status
  controlplane start [flags]                    start and stay in the foreground until SIGINT/SIGTERM
  controlplane clean                            remove what killed node runs left (state dirs, cgroups)
With -node, a one-node cluster instead (KUBELEASE_NODE_ENV=DIR; README.md, "The node").
flags:
`

var quiet bool

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controlplane: "+format+"\n", args...)
}

func verbosef(format string, args ...any) {
	if !quiet {
		logf(format, args...)
	}
}

type options struct {
	stateDir, binDir, etcdBin, apiBin string
	timeout                           time.Duration
	keep                              bool
	node                              bool     // a one-node cluster (node.go)
	images                            []string // image archives the node's containerd imports
	cmd                               []string
}

func defaultBinDir() string {
	cache := os.Getenv("KUBELEASE_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "kubelease")
	}
	return filepath.Join(cache, "bin")
}

// binaryError is a missing or unusable etcd/kube-apiserver binary.
type binaryError string

func (e binaryError) Error() string { return string(e) }

func parse(args []string) (mode string, o options, err error) {
	if len(args) == 0 {
		return "", o, errors.New("no command given")
	}
	mode = args[0]
	if mode == "-h" || mode == "--help" || mode == "help" {
		return "help", o, nil
	}
	if mode == "clean" {
		return mode, o, nil
	}
	if mode != "run" && mode != "start" {
		return "", o, fmt.Errorf("unknown command %q (want run, start or clean)", mode)
	}
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	fs.StringVar(&o.stateDir, "state-dir", "", "state directory (default: a new temp dir, removed at exit)")
	fs.StringVar(&o.binDir, "bin-dir", defaultBinDir(), "directory holding etcd.current and kube-apiserver.current")
	fs.StringVar(&o.etcdBin, "etcd", "", "etcd binary (default: BIN-DIR/etcd.current)")
	fs.StringVar(&o.apiBin, "kube-apiserver", "", "kube-apiserver binary (default: BIN-DIR/kube-apiserver.current)")
	fs.DurationVar(&o.timeout, "timeout", 120*time.Second, "how long each component may take to become ready")
	fs.BoolVar(&o.keep, "keep", false, "keep the state directory at exit even if the harness created it")
	fs.BoolVar(&quiet, "q", false, "print only errors")
	fs.BoolVar(&o.node, "node", false, "run a one-node cluster (kubelet, containerd, kube-proxy, ...) in namespaces of its own")
	fs.Func("image", "with -node: an image archive to import into the node's containerd (repeatable)", func(v string) error {
		o.images = append(o.images, v)
		return nil
	})
	if err := fs.Parse(args[1:]); err != nil {
		return "", o, err
	}
	o.cmd = fs.Args()
	if mode == "run" && len(o.cmd) == 0 {
		return "", o, errors.New("run needs a command: controlplane run [flags] -- CMD [ARGS...]")
	}
	if mode == "start" && len(o.cmd) != 0 {
		return "", o, fmt.Errorf("start takes no command (got %q); use run", o.cmd[0])
	}
	if o.timeout <= 0 {
		return "", o, fmt.Errorf("-timeout must be positive, not %s", o.timeout)
	}
	if o.etcdBin == "" {
		o.etcdBin = filepath.Join(o.binDir, "etcd.current")
	}
	if o.apiBin == "" {
		o.apiBin = filepath.Join(o.binDir, "kube-apiserver.current")
	}
	for _, b := range []struct{ what, path string }{{"etcd", o.etcdBin}, {"kube-apiserver", o.apiBin}} {
		fi, err := os.Stat(b.path)
		switch {
		case err != nil:
			return "", o, binaryError(fmt.Sprintf("%s binary not found: %s (build it with scripts/build-control-plane.sh, or pass -bin-dir)", b.what, b.path))
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			return "", o, binaryError(fmt.Sprintf("%s binary is not an executable file: %s", b.what, b.path))
		}
	}
	return mode, o, nil
}

func main() {
	// The node's own processes (nodeinit.go), started by the harness.
	if len(os.Args) == 3 && (os.Args[1] == "node-init" || os.Args[1] == "node-supervise") {
		quiet = nodeQuiet()
		if os.Args[1] == "node-init" {
			os.Exit(nodeInit(os.Args[2]))
		}
		os.Exit(nodeSupervise(os.Args[2]))
	}
	mode, o, err := parse(os.Args[1:])
	if mode == "help" {
		fmt.Print(usage)
		fmt.Println("  (run 'controlplane run -h' for the flags)")
		os.Exit(0)
	}
	var be binaryError
	switch {
	case errors.As(err, &be):
		logf("error: %v", err)
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		logf("error: %v", err)
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if mode == "clean" {
		os.Exit(clean())
	}
	os.Exit(run(mode, o))
}

// clean removes what node runs killed before their teardown left: their
// state directories (in the temporary directory) and their cgroups; those of
// a running node (its directory locked) stay.
func clean() int {
	stale, live := nodeDirs(os.TempDir())
	for _, d := range stale {
		if err := os.RemoveAll(d); err != nil {
			logf("warning: %v", err)
			continue
		}
		verbosef("removed the state directory %s", d)
	}
	roots, err := nodeCgroupRoots()
	if err != nil {
		logf("error: %v", err)
		return 1
	}
	for _, r := range roots {
		if live[r] {
			continue
		}
		if err := removeCgroupRoot(r, 0); err != nil {
			verbosef("%s is in use; left alone", r)
			continue
		}
		verbosef("removed the cgroups %s", r)
	}
	return 0
}

// env is one harness run: the cluster, its control endpoint and what to
// clean up.
type env struct {
	o         options
	c         *cluster // the loopback control plane, or
	n         *node    // the node (-node)
	stateDir  string
	ctl       *control
	ctx       context.Context
	cancel    context.CancelFunc
	removeDir bool
}

// run brings the control plane up, runs the command (or waits for a
// signal), and always tears everything down.
func run(mode string, o options) int {
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	e := &env{o: o}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer e.teardown()

	// A signal during start-up aborts it.
	startDone, watcherGone := make(chan struct{}), make(chan struct{})
	startSig := make(chan os.Signal, 1)
	go func() {
		defer close(watcherGone)
		select {
		case s := <-sigc:
			startSig <- s
			e.cancel()
		case <-startDone:
		}
	}()
	t0 := time.Now()
	err := e.startUp()
	close(startDone)
	<-watcherGone
	select {
	case s := <-startSig:
		logf("interrupted by %s during start-up; stopping", s)
		return 128 + int(s.(syscall.Signal))
	default:
	}
	if err != nil {
		logf("error: %v", err)
		return 1
	}
	verbosef("ready in %.1fs: %s=%s", time.Since(t0).Seconds(), e.envVar(), e.stateDir)

	if mode == "start" {
		fmt.Printf("%s=%s\n", e.envVar(), e.stateDir)
		s := <-sigc
		verbosef("%s: stopping", s)
		return 128 + int(s.(syscall.Signal))
	}
	return e.runCommand(sigc)
}

func (e *env) startUp() error {
	o := e.o
	dir := o.stateDir
	if dir == "" {
		prefix := "kubelease-cp-"
		if o.node {
			prefix = "kubelease-node-"
		}
		d, err := os.MkdirTemp("", prefix)
		if err != nil {
			return fmt.Errorf("creating the state dir: %w", err)
		}
		dir, e.removeDir = d, !o.keep
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		dir = abs
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("creating the state dir: %w", err)
			}
			e.removeDir = !o.keep
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("state dir %s exists and is not a directory", dir)
		}
		// A stale env file would announce a control plane that is not up.
		os.Remove(filepath.Join(dir, "env"))
	}
	e.stateDir = dir
	if o.node {
		return e.startNode()
	}
	e.c = &cluster{stateDir: dir, etcdBin: o.etcdBin, apiBin: o.apiBin, timeout: o.timeout}
	if err := e.c.up(e.ctx); err != nil {
		return err
	}
	t := time.Now()
	tokens, err := e.c.setupObjects(e.ctx)
	if err != nil {
		return fmt.Errorf("creating the test objects: %w", err)
	}
	if e.ctl, err = newControl(e.ctx, e.c); err != nil {
		return err
	}
	if err := e.c.writeState(tokens, e.ctl.url(), o.binDir); err != nil {
		return err
	}
	verbosef("objects and token ready in %.2fs", time.Since(t).Seconds())
	return nil
}

func (e *env) startNode() error {
	e.n = &node{d: nodePaths(e.stateDir), binDir: e.o.binDir, images: e.o.images, timeout: e.o.timeout}
	if err := e.n.check(); err != nil {
		return err
	}
	if err := e.n.up(e.ctx); err != nil {
		return err
	}
	return e.n.writeNodeState(e.o.binDir)
}

// envVar names the variable that points CMD at the state directory.
func (e *env) envVar() string {
	if e.o.node {
		return "KUBELEASE_NODE_ENV"
	}
	return "KUBELEASE_TEST_ENV"
}

// runCommand runs the user's command with KUBELEASE_TEST_ENV set. It stays
// in the harness's process group, so a Ctrl-C at the terminal reaches it
// directly; signals sent to the harness alone are forwarded.
func (e *env) runCommand(sigc chan os.Signal) int {
	cmd := exec.Command(e.o.cmd[0], e.o.cmd[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), e.envVar()+"="+e.stateDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf("error: cannot run %s: %v", e.o.cmd[0], err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var got os.Signal
	var err error
	select {
	case err = <-done:
	case got = <-sigc:
		verbosef("%s: stopping %s", got, e.o.cmd[0])
		_ = cmd.Process.Signal(got)
		select {
		case err = <-done:
		case <-sigc:
			_ = cmd.Process.Kill()
			err = <-done
		case <-time.After(10 * time.Second):
			logf("%s did not exit within 10s; killing it", e.o.cmd[0])
			_ = cmd.Process.Kill()
			err = <-done
		}
	}
	if got != nil {
		return 128 + int(got.(syscall.Signal))
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		logf("error: waiting for %s: %v", e.o.cmd[0], err)
		return 1
	}
}

// teardown stops the apiserver, then etcd, and removes the temp dirs. It
// runs on every exit path.
func (e *env) teardown() {
	e.cancel()
	if e.ctl != nil {
		e.ctl.close()
	}
	if e.c != nil {
		e.c.down()
	}
	if e.n != nil {
		e.n.down()
	}
	if e.removeDir && e.stateDir != "" {
		os.RemoveAll(e.stateDir)
	}
	verbosef("stopped")
}
