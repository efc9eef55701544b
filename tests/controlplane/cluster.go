package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1"
	issuer      = "https://kubernetes.default.svc.cluster.local"
	stopGrace   = 5 * time.Second
)

// cluster is one etcd plus one kube-apiserver on loopback.
type cluster struct {
	stateDir string
	etcdDir  string // etcd's data (STATE/etcd-data), removed at teardown
	etcdBin  string
	apiBin   string
	timeout  time.Duration // for each component to become ready

	etcdPort, etcdPeerPort, apiPort int

	pki   *pki
	admin *http.Client
	etcd  *proc
	api   *proc

	apiMu  sync.Mutex // serialises apiserver start/stop (control endpoint)
	etcdMu sync.Mutex // serialises etcd stop/start (control endpoint)
}

func (c *cluster) pkiDir() string  { return filepath.Join(c.stateDir, "pki") }
func (c *cluster) apiURL() string  { return fmt.Sprintf("https://127.0.0.1:%d", c.apiPort) }
func (c *cluster) etcdURL() string { return fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort) }

// freePorts returns n distinct loopback ports that were free a moment ago.
// A component that loses the race for one is restarted on fresh ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// up starts etcd and the apiserver and waits until the apiserver is ready.
func (c *cluster) up(ctx context.Context) error {
	var err error
	if c.pki, err = newPKI(); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	if err := c.pki.write(c.pkiDir()); err != nil {
		return err
	}
	if c.admin, err = c.client(true, ""); err != nil {
		return err
	}
	c.etcd = &proc{name: "etcd", bin: c.etcdBin, logPath: filepath.Join(c.stateDir, "etcd.log")}
	c.api = &proc{name: "kube-apiserver", bin: c.apiBin, logPath: filepath.Join(c.stateDir, "kube-apiserver.log")}

	t0 := time.Now()
	if err := c.retryPorts(ctx, c.startEtcd); err != nil {
		return err
	}
	t1 := time.Now()
	if err := c.retryPorts(ctx, func(ctx context.Context) error {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		c.apiPort = ports[0]
		return c.startAPIServer(ctx)
	}); err != nil {
		return err
	}
	verbosef("etcd ready in %.1fs, kube-apiserver ready in %.1fs",
		t1.Sub(t0).Seconds(), time.Since(t1).Seconds())
	return nil
}

// retryPorts runs start up to three times while it fails because a port it
// picked was taken in the meantime.
func (c *cluster) retryPorts(ctx context.Context, start func(context.Context) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = start(ctx)
		var se *startError
		if err == nil || !errors.As(err, &se) || !strings.Contains(se.tail, "address already in use") {
			return err
		}
		verbosef("a port was taken; retrying on fresh ports")
	}
	return err
}

func (c *cluster) startEtcd(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	c.etcdPort, c.etcdPeerPort = ports[0], ports[1]
	// A fresh data dir every time (a killed earlier run may have left one).
	c.etcdDir = filepath.Join(c.stateDir, "etcd-data")
	if err := os.RemoveAll(c.etcdDir); err != nil {
		return fmt.Errorf("removing the old etcd data dir: %w", err)
	}
	if err := os.Mkdir(c.etcdDir, 0o700); err != nil {
		return fmt.Errorf("creating etcd's data dir: %w", err)
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.etcdPeerPort)
	c.etcd.args = []string{
		"--name=kubelease-test",
		"--data-dir=" + c.etcdDir,
		"--listen-client-urls=" + c.etcdURL(),
		"--advertise-client-urls=" + c.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=kubelease-test=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
		"--quota-backend-bytes=1073741824",
	}
	if err := c.etcd.start(); err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	return c.waitReady(ctx, c.etcd, func() bool {
		return probe(plain, c.etcdURL()+"/health", `"health":"true"`)
	})
}

func (c *cluster) apiArgs() []string {
	pk := c.pkiDir()
	return []string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.apiPort),
		"--tls-cert-file=" + filepath.Join(pk, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pk, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pk, "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + filepath.Join(pk, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pk, "sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--disable-admission-plugins=" + strings.Join([]string{
			"ServiceAccount", "TaintNodesByCondition", "Priority", "DefaultTolerationSeconds",
			"DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize",
			"RuntimeClass", "DefaultIngressClass", "PodSecurity",
			"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook",
		}, ","),
		"--profiling=false",
		"--cert-dir=" + pk,
		// Lease spec.preferredHolder and spec.strategy persist only with
		// this gate (the apiserver drops them otherwise); kubeleased honours
		// preferredHolder (docs/design.md, rule 3). With the gate on, the
		// apiserver's coordinated leader election controller watches
		// LeaseCandidates, and /readyz waits for that informer: their API
		// (beta in 1.34) must be served.
		"--feature-gates=CoordinatedLeaderElection=true",
		"--runtime-config=coordination.k8s.io/v1beta1=true",
	}
}

// startAPIServer starts the apiserver on c.apiPort and waits for /readyz.
func (c *cluster) startAPIServer(ctx context.Context) error {
	c.api.args = c.apiArgs()
	if err := c.api.start(); err != nil {
		return err
	}
	return c.waitReady(ctx, c.api, func() bool {
		return probe(c.admin, c.apiURL()+"/readyz", "ok")
	})
}

// waitReady polls ready until it holds, the component exits, ctx ends or
// the timeout passes; on failure the component is stopped.
func (c *cluster) waitReady(ctx context.Context, p *proc, ready func() bool) error {
	return waitReady(ctx, p, c.timeout, ready)
}

func waitReady(ctx context.Context, p *proc, timeout time.Duration, ready func() bool) (err error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		if err == nil {
			p.setUp()
		}
	}()
	for !ready() {
		select {
		case <-p.exited():
			return p.failure("exited during start-up (" + exitText(p.exitErr()) + ")")
		case <-ctx.Done():
			p.stop(syscall.SIGTERM, stopGrace)
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			err := p.failure(fmt.Sprintf("was not ready within %s", timeout))
			p.stop(syscall.SIGTERM, stopGrace)
			return err
		}
	}
	return nil
}

// probe is true when GET url answers 200 with a body containing want.
func probe(hc *http.Client, url, want string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), want)
}

// client returns an HTTPS client for the apiserver that trusts the test CA;
// admin selects the system:masters client certificate, else token (may be
// empty) is sent as a bearer token.
func (c *cluster) client(admin bool, token string) (*http.Client, error) {
	return c.pki.client(admin, token)
}

func (p *pki) client(admin bool, token string) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.caCert) {
		return nil, errors.New("cannot parse the generated CA")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if admin {
		cert, err := tls.X509KeyPair(p.adminCert, p.adminKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4}
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// stopAPIServer stops the apiserver with sig (SIGTERM or SIGKILL).
func (c *cluster) stopAPIServer(sig syscall.Signal) {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	c.api.stop(sig, stopGrace)
	c.admin.CloseIdleConnections()
}

// restartAPIServer starts a stopped apiserver on the same port with the same
// certificates and waits until it is ready.
func (c *cluster) restartAPIServer(ctx context.Context) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if c.api.running() {
		return nil
	}
	return c.startAPIServer(ctx)
}

// stopEtcd stops etcd with sig (SIGTERM or SIGKILL); its data stays.
func (c *cluster) stopEtcd(sig syscall.Signal) {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	c.etcd.stop(sig, stopGrace)
}

// restartEtcd starts a stopped etcd again with the same ports and data (a
// restart after a crash, unlike startEtcd) and waits until it is healthy.
func (c *cluster) restartEtcd(ctx context.Context) error {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd.running() {
		return nil
	}
	if err := c.etcd.start(); err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	return c.waitReady(ctx, c.etcd, func() bool {
		return probe(plain, c.etcdURL()+"/health", `"health":"true"`)
	})
}

// down stops the apiserver, then etcd, and removes etcd's data.
func (c *cluster) down() {
	if c.api != nil {
		c.apiMu.Lock()
		c.api.stop(syscall.SIGTERM, stopGrace)
		c.apiMu.Unlock()
	}
	if c.etcd != nil {
		c.etcdMu.Lock()
		c.etcd.stop(syscall.SIGTERM, stopGrace)
		c.etcdMu.Unlock()
	}
	if c.etcdDir != "" {
		os.RemoveAll(c.etcdDir)
		c.etcdDir = ""
	}
}
