package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child component (etcd or kube-apiserver). It runs in its own
// process group, so a Ctrl-C at the terminal does not reach it and the
// harness decides the order of shutdown; Pdeathsig kills it if the harness
// itself dies without cleaning up.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current run has exited
	err      error         // its exit status, once done is closed
	stopping bool          // the harness asked it to stop
	up       bool          // the current run became ready
	logStart int64         // offset in logPath where the current run began
}

// start launches the component, appending its output to logPath.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is already running", p.name)
	}
	out, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child keeps its own descriptor
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	p.logStart = fi.Size()
	fmt.Fprintf(out, "==== controlplane: starting %s at %s: %s %s\n", p.name,
		time.Now().UTC().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))

	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start %s (%s): %w", p.name, p.bin, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.stopping, p.up = cmd, done, nil, false, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		crashed := p.up && !p.stopping
		p.mu.Unlock()
		close(done)
		if crashed {
			logf("warning: %s exited unexpectedly (%s); see %s", p.name, exitText(err), p.logPath)
		}
	}()
	return nil
}

// setUp records that the current run became ready; from then on an exit
// the harness did not ask for is reported.
func (p *proc) setUp() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

// exited returns a channel closed when the current run ends (nil if never
// started).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// pid is the process id of the current run, 0 when not running.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// stop sends sig (SIGTERM for a graceful stop, SIGKILL for a crash) to the
// component's process group and waits; after grace it kills it. A component
// that is not running is left alone.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	if p.cmd == nil || isClosed(p.done) {
		p.mu.Unlock()
		return
	}
	p.stopping = true
	pid, done := p.cmd.Process.Pid, p.done
	p.mu.Unlock()

	_ = syscall.Kill(-pid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		logf("%s did not stop within %s; killing it", p.name, grace)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	// Anything left in the group (there should be nothing) goes too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// logTail returns the last n lines the current run wrote to its log, each
// cut to a readable width.
func (p *proc) logTail(n int) string {
	p.mu.Lock()
	start := p.logStart
	p.mu.Unlock()
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(f, 16<<20))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 0 && strings.HasPrefix(lines[0], "==== controlplane:") {
		lines = lines[1:]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b bytes.Buffer
	for _, l := range lines {
		if len(l) > 300 {
			l = l[:300] + "..."
		}
		b.WriteString("  | ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// failure describes a component that failed to start: one line naming it,
// then the tail of its log.
func (p *proc) failure(what string) error {
	return &startError{msg: fmt.Sprintf("%s %s; last lines of its log (%s):", p.name, what, filepath.Base(p.logPath)), tail: p.logTail(20)}
}

type startError struct {
	msg, tail string
}

func (e *startError) Error() string { return e.msg + "\n" + e.tail }

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
