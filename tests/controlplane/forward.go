package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// forwarder accepts connections on one address and connects each to
// another: the node's supervisor forwards a unix socket in the state
// directory to the apiserver inside the node's network namespace, and the
// harness a loopback port of the machine to that socket, so that programs
// outside (helm, the tests) reach the apiserver. (A socket file crosses
// network namespaces; no thread of the harness has to enter one.)
type forwarder struct {
	ln              net.Listener
	dialNet, dialTo string
	wg              sync.WaitGroup
	mu              sync.Mutex
	conns           map[net.Conn]struct{}
}

func newForwarder(listenNet, listenAddr, dialNet, dialTo string) (*forwarder, error) {
	ln, err := net.Listen(listenNet, listenAddr)
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	f := &forwarder{ln: ln, dialNet: dialNet, dialTo: dialTo, conns: map[net.Conn]struct{}{}}
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
	up, err := net.DialTimeout(f.dialNet, f.dialTo, 5*time.Second)
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
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
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
