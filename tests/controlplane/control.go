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
// restart the apiserver (see README.md).
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
	body := map[string]any{"apiserver": state, "url": k.c.apiURL()}
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
	down := 0
	if s := r.URL.Query().Get("down_ms"); s != "" {
		down, err = strconv.Atoi(s)
		if err != nil || down < 0 || down > 600000 {
			k.reply(w, http.StatusBadRequest, fmt.Errorf("down_ms must be an integer from 0 to 600000, not %q", s))
			return
		}
	}
	k.c.stopAPIServer(sig)
	verbosef("control: kube-apiserver stopped (%s), down for %dms", sig, down)
	select {
	case <-time.After(time.Duration(down) * time.Millisecond):
	case <-k.ctx.Done():
		k.reply(w, http.StatusServiceUnavailable, k.ctx.Err())
		return
	}
	k.start(w, r)
}
