package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// forwarder accepts connections on a loopback port of the machine and
// connects each to an address inside the node's network namespace, so that
// programs outside (helm, the tests) reach the apiserver there.
type forwarder struct {
	ln     net.Listener
	netns  string // /proc/PID/ns/net of a process in the node
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newForwarder(netns, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	f := &forwarder{ln: ln, netns: netns, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

func (f *forwarder) track(c net.Conn, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

// pipe copies both ways until both directions are done.
func (f *forwarder) pipe(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	up, err := dialInNetns(f.netns, f.target)
	if err != nil {
		verbosef("forwarder: %v", err)
		return
	}
	defer up.Close()
	f.track(c, true)
	f.track(up, true)
	defer f.track(c, false)
	defer f.track(up, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// close stops accepting and ends the connections in flight.
func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// dialInNetns connects to the TCP address addr inside the network namespace
// netns (a /proc/PID/ns/net path). The socket is made on a thread that has
// joined that namespace; the thread stays locked, so it ends with its
// goroutine instead of running other goroutines in the wrong namespace.
func dialInNetns(netns, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(netns)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer ns.Close()
		if _, _, e := syscall.RawSyscall(sysSetns, ns.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			ch <- result{nil, fmt.Errorf("joining %s: %w", netns, e)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
