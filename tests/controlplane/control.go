package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// control is the loopback HTTP endpoint tests use to stop, start and
// restart the apiserver and etcd (see README.md).
type control struct {
	c   *cluster
	ln  net.Listener
	srv *http.Server
	ctx context.Context // ends at teardown, aborting a start in progress
}

func newControl(ctx context.Context, c *cluster) (*control, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("control endpoint: %w", err)
	}
	k := &control{c: c, ln: ln, ctx: ctx}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /apiserver", k.status)
	mux.HandleFunc("POST /apiserver/stop", k.stop)
	mux.HandleFunc("POST /apiserver/start", k.start)
	mux.HandleFunc("POST /apiserver/restart", k.restart)
	mux.HandleFunc("GET /etcd", k.etcdStatus)
	mux.HandleFunc("POST /etcd/stop", k.etcdStop)
	mux.HandleFunc("POST /etcd/start", k.etcdStart)
	mux.HandleFunc("POST /etcd/restart", k.etcdRestart)
	k.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go k.srv.Serve(ln)
	return k, nil
}

func (k *control) url() string { return "http://" + k.ln.Addr().String() }

func (k *control) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	k.srv.Shutdown(ctx)
}

func (k *control) reply(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	state := "stopped"
	if k.c.api.running() {
		state = "running"
	}
	body := map[string]any{"apiserver": state, "url": k.c.apiURL(), "pid": k.c.api.pid()}
	if err != nil {
		body["error"] = err.Error()
	}
	json.NewEncoder(w).Encode(body)
}

func (k *control) status(w http.ResponseWriter, _ *http.Request) {
	k.reply(w, http.StatusOK, nil)
}

// signalParam reads ?signal=TERM|KILL (default TERM): KILL simulates a crash.
func signalParam(r *http.Request) (syscall.Signal, error) {
	switch s := r.URL.Query().Get("signal"); s {
	case "", "TERM":
		return syscall.SIGTERM, nil
	case "KILL":
		return syscall.SIGKILL, nil
	default:
		return 0, fmt.Errorf("signal must be TERM or KILL, not %q", s)
	}
}

func (k *control) stop(w http.ResponseWriter, r *http.Request) {
	sig, err := signalParam(r)
	if err != nil {
		k.reply(w, http.StatusBadRequest, err)
		return
	}
	k.c.stopAPIServer(sig)
	verbosef("control: kube-apiserver stopped (%s)", sig)
	k.reply(w, http.StatusOK, nil)
}

func (k *control) start(w http.ResponseWriter, _ *http.Request) {
	t0 := time.Now()
	if err := k.c.restartAPIServer(k.ctx); err != nil {
		k.reply(w, http.StatusInternalServerError, err)
		return
	}
	verbosef("control: kube-apiserver ready after %.1fs", time.Since(t0).Seconds())
	k.reply(w, http.StatusOK, nil)
}

// restart stops the apiserver, keeps it down for down_ms, starts it again on
// the same port and answers once it is ready.
func (k *control) restart(w http.ResponseWriter, r *http.Request) {
	sig, err := signalParam(r)
	if err != nil {
		k.reply(w, http.StatusBadRequest, err)
		return
	}
	down, err := downParam(r)
	if err != nil {
		k.reply(w, http.StatusBadRequest, err)
		return
	}
	k.c.stopAPIServer(sig)
	verbosef("control: kube-apiserver stopped (%s), down for %dms", sig, down)
	if !k.sleep(down) {
		k.reply(w, http.StatusServiceUnavailable, k.ctx.Err())
		return
	}
	k.start(w, r)
}

// downParam reads ?down_ms=N (0-600000, default 0).
func downParam(r *http.Request) (int, error) {
	s := r.URL.Query().Get("down_ms")
	if s == "" {
		return 0, nil
	}
	down, err := strconv.Atoi(s)
	if err != nil || down < 0 || down > 600000 {
		return 0, fmt.Errorf("down_ms must be an integer from 0 to 600000, not %q", s)
	}
	return down, nil
}

// sleep waits ms milliseconds; false when the harness is tearing down.
func (k *control) sleep(ms int) bool {
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return true
	case <-k.ctx.Done():
		return false
	}
}

func (k *control) etcdReply(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	state := "stopped"
	if k.c.etcd.running() {
		state = "running"
	}
	body := map[string]any{"etcd": state, "url": k.c.etcdURL(), "pid": k.c.etcd.pid()}
	if err != nil {
		body["error"] = err.Error()
	}
	json.NewEncoder(w).Encode(body)
}

func (k *control) etcdStatus(w http.ResponseWriter, _ *http.Request) {
	k.etcdReply(w, http.StatusOK, nil)
}

func (k *control) etcdStop(w http.ResponseWriter, r *http.Request) {
	sig, err := signalParam(r)
	if err != nil {
		k.etcdReply(w, http.StatusBadRequest, err)
		return
	}
	k.c.stopEtcd(sig)
	verbosef("control: etcd stopped (%s)", sig)
	k.etcdReply(w, http.StatusOK, nil)
}

func (k *control) etcdStart(w http.ResponseWriter, _ *http.Request) {
	if err := k.c.restartEtcd(k.ctx); err != nil {
		k.etcdReply(w, http.StatusInternalServerError, err)
		return
	}
	verbosef("control: etcd ready")
	k.etcdReply(w, http.StatusOK, nil)
}

// etcdRestart stops etcd (its data stays), keeps it down for down_ms, starts
// it again on the same ports and answers once it is healthy.
func (k *control) etcdRestart(w http.ResponseWriter, r *http.Request) {
	sig, err := signalParam(r)
	if err == nil {
		var down int
		if down, err = downParam(r); err == nil {
			k.c.stopEtcd(sig)
			verbosef("control: etcd stopped (%s), down for %dms", sig, down)
			if !k.sleep(down) {
				k.etcdReply(w, http.StatusServiceUnavailable, k.ctx.Err())
				return
			}
			k.etcdStart(w, r)
			return
		}
	}
	k.etcdReply(w, http.StatusBadRequest, err)
}
