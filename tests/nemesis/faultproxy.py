#!/usr/bin/env python3
"""The nemesis's fault proxy: every link between two processes of the test
(replica -> kubeleased, kubeleased -> apiserver) goes through one of its links,
and the nemesis changes a link's behaviour at run time.

Two kinds of link:
  tcp   forwards bytes (HTTP/1.1 of the replicas, or the TLS and HTTP/2 of
        kubeleased to the apiserver, untouched). Faults act on the byte
        stream: delay, loss (as retransmission stalls), blackhole, one-way
        blackhole, drop, reset, half-open.
  http  terminates TLS with a certificate issued by the test CA (ALPN
        http/1.1 only, so the client speaks HTTP/1.1 on this link), parses
        each request and answer, and forwards them over TLS to the upstream.
        Faults act on requests: 429 with Retry-After, 500 (before or after
        the request reached the apiserver), 409 on writes, slow answers.

One process, one asyncio loop (no threads). Control: one line per command
on a loopback TCP port (written to --port-file), one line of answer:
  add NAME tcp|http UPSTREAM...   -> "ok PORT" (UPSTREAM is host:port)
  target NAME INDEX               new connections go to upstream INDEX first
                                  (it follows the last upstream that accepted one,
                                  as a Service with ClientIP affinity does)
  balance NAME random|target      random: each new connection goes to an upstream
                                  drawn at random (as a Service does), not the target
  where NAME                      -> "ok INDEX": where new connections go first
  cut NAME                        resets every open connection of the link
  fault NAME KIND [ARG...]        replaces the link's fault (see FAULTS)
  heal NAME                       ends the link's fault
  stats                           one JSON object: per-link counters
Upstreams that refuse a connection are skipped for the next one, and the
link then stays with the one that accepted (a Service with session affinity
in front of the kubeleased replicas does the same)."""

import argparse
import asyncio
import json
import os
import random
import socket
import ssl
import struct
import sys
import time

FAULTS = {
    # tcp links
    "delay": "delay MS [JITTER_MS]: every chunk arrives MS (+ up to JITTER) later, in order",
    "loss": "loss P: a chunk stalls with probability P for a retransmission (200-1600 ms)",
    "blackhole": "nothing moves either way and nothing is lost; new connections hang",
    "oneway": "oneway up|down: one direction is held (up: to the upstream)",
    "drop": "everything sent is lost; the connections are reset when it heals",
    "reset": "every connection is reset, and new ones at once, while it lasts",
    "halfopen": "halfopen client|server: the other side is closed, this one left silent",
    # http links
    "err429": "err429 P: a request is answered 429 with Retry-After: 1 (not forwarded)",
    "err500": "err500 P: a request is answered 500 (not forwarded)",
    "err500after": "err500after P: a write is forwarded, its answer replaced by 500",
    "err409": "err409 P: a write (POST, PUT, PATCH, DELETE) is answered 409 Conflict",
    "slow": "slow MS: every answer is held MS before it is forwarded",
}


WRITES = ("POST", "PUT", "PATCH", "DELETE")


def log(msg):
    sys.stderr.write("%s faultproxy: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def rst(writer):
    """Closes a connection with a TCP reset (SO_LINGER 0), as a peer that
    lost its state does."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class Link:
    def __init__(self, name, kind, upstreams, tls):
        self.name, self.kind, self.upstreams, self.tls = name, kind, upstreams, tls
        self.target = 0
        self.random = False
        self.fault = None  # (kind, args) or None
        self.changed = asyncio.Event()
        self.conns = set()
        self.stats = {"accepted": 0, "upstream_failed": 0, "resets": 0, "injected": 0,
                      "requests": 0}
        self.server = None
        self.port = 0

    def set_fault(self, fault):
        old, self.fault = self.fault, fault
        for c in list(self.conns):
            c.fault_changed(old, fault)
        self.changed.set()
        self.changed = asyncio.Event()

    def fault_kind(self):
        return self.fault[0] if self.fault else None

    def fault_arg(self, i, default):
        if not self.fault or len(self.fault[1]) <= i:
            return default
        return float(self.fault[1][i])

    def holds(self, direction):
        k = self.fault_kind()
        if k == "blackhole":
            return True
        if k == "oneway":
            return self.fault[1][0] == direction
        return False

    async def connect_upstream(self, ctx=None):
        first = random.randrange(len(self.upstreams)) if self.random else self.target
        order = [first] + [i for i in range(len(self.upstreams)) if i != first]
        for i in order:
            host, port = self.upstreams[i]
            try:
                pair = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=ctx,
                                            server_hostname=host if ctx else None), 2.0)
            except (OSError, asyncio.TimeoutError, ssl.SSLError):
                self.stats["upstream_failed"] += 1
                continue
            if not self.random:
                self.target = i  # sticky, as kube-proxy's ClientIP affinity
            return pair
        return None, None


class TcpConn:
    """One client connection of a tcp link and its upstream connection."""

    def __init__(self, link, creader, cwriter):
        self.link = link
        self.cr, self.cw = creader, cwriter
        self.ur = self.uw = None
        self.dropped = False  # data is lost; reset at heal
        self.silent = None  # "client" or "server": that side is left silent
        self.closed = False
        self.last_due = {"up": 0.0, "down": 0.0}
        self.queues = {"up": asyncio.Queue(), "down": asyncio.Queue()}
        self.tasks = []

    def fault_changed(self, old, new):
        kind = new[0] if new else None
        if kind == "reset":
            self.reset()
        elif kind == "drop":
            self.dropped = True
        elif kind == "halfopen":
            side = new[1][0]
            self.silent = side
            rst(self.uw if side == "client" else self.cw)
        elif kind is None and (self.dropped or self.silent):
            self.reset()

    def reset(self):
        if self.closed:
            return
        self.closed = True
        self.link.stats["resets"] += 1
        rst(self.cw)
        rst(self.uw)
        for t in self.tasks:
            t.cancel()
        self.link.conns.discard(self)

    def lost(self, direction):
        """True when data in direction is lost: a drop, or a half-open
        connection (one side gone, the other left silent)."""
        return self.dropped or self.silent is not None

    async def run(self):
        link = self.link
        k = link.fault_kind()
        if k == "reset":
            self.reset()
            return
        if k == "drop":
            self.dropped = True
        # A blackhole also holds the connection's set-up (SYNs go nowhere).
        while link.holds("up") and link.fault_kind() == "blackhole" and not self.closed:
            await link.changed.wait()
        if self.closed:
            return
        if self.dropped:  # no upstream: what the client sends is lost until the heal resets it
            self.tasks = [asyncio.ensure_future(self.swallow())]
        else:
            self.ur, self.uw = await link.connect_upstream()
            if self.ur is None:
                self.reset()
                return
            self.tasks = [asyncio.ensure_future(f) for f in (
                self.pump("up", self.cr), self.deliver("up"),
                self.pump("down", self.ur), self.deliver("down"))]
        try:
            await asyncio.gather(*self.tasks)
        except asyncio.CancelledError:
            pass
        except Exception:  # a connection error ends the pair
            pass
        self.close()

    async def swallow(self):
        while await self.cr.read(65536):
            pass

    def close(self):
        if self.closed:
            return
        self.closed = True
        for t in self.tasks:
            t.cancel()
        for w in (self.cw, self.uw):
            if w is not None:
                w.transport.abort()
        self.link.conns.discard(self)

    async def pump(self, direction, reader):
        while True:
            try:
                data = await reader.read(65536)
            except (OSError, ConnectionError):
                data = b""
            if self.lost(direction):
                if not data:
                    await asyncio.Event().wait()  # stays until reset at heal
                continue
            now = time.monotonic()
            due = now
            k = self.link.fault_kind()
            if k == "delay":
                due += (self.link.fault_arg(0, 0) + random.uniform(0, self.link.fault_arg(1, 0))) / 1e3
            elif k == "loss" and random.random() < self.link.fault_arg(0, 0):
                due += 0.2 * (2 ** random.randint(0, 3))
            due = max(due, self.last_due[direction])
            self.last_due[direction] = due
            await self.queues[direction].put((due, data))
            if not data:
                return

    async def deliver(self, direction):
        writer = self.uw if direction == "up" else self.cw
        while True:
            due, data = await self.queues[direction].get()
            while True:
                if self.lost(direction):
                    data = None
                    break
                if self.link.holds(direction):
                    await self.link.changed.wait()
                    continue
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                break
            if data is None:
                continue
            if not data:
                try:
                    writer.write_eof()
                except (OSError, RuntimeError):
                    pass
                return
            writer.write(data)
            await writer.drain()


def status_body(code, reason, message, retry_after=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": "nemesis: " + message, "reason": reason, "code": code}
    if retry_after:
        st["details"] = {"retryAfterSeconds": retry_after}
    return json.dumps(st).encode()


REASONS = {429: ("Too Many Requests", "TooManyRequests"), 500: ("Internal Server Error", "InternalError"),
           409: ("Conflict", "Conflict")}


class HttpConn:
    """One client connection of an http link: requests are read one at a
    time (curl does not pipeline) and answered from the upstream or by a
    fault."""

    def __init__(self, link, creader, cwriter):
        self.link, self.cr, self.cw = link, creader, cwriter
        self.ur = self.uw = None

    def fault_changed(self, old, new):
        pass

    def reset(self):
        rst(self.cw)
        rst(self.uw)

    async def read_head(self, reader):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return head, lines[0], headers

    async def relay_body(self, reader, writer, headers, no_body=False):
        """Copies one message body from reader to writer (if writer is not
        None), chunk by chunk for chunked bodies (watch streams)."""
        if no_body:
            return True
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                data = await reader.readexactly(size + 2) if size else b""
                if writer:
                    writer.write(line + data)
                if size == 0:
                    while True:  # trailers, then the empty line
                        t = await reader.readuntil(b"\r\n")
                        if writer:
                            writer.write(t)
                        if t == b"\r\n":
                            break
                    if writer:
                        await writer.drain()
                    return True
                if writer:
                    await writer.drain()
        if "content-length" in headers:
            n = int(headers["content-length"])
            while n > 0:
                data = await reader.read(min(n, 65536))
                if not data:
                    raise ConnectionError("body cut short")
                n -= len(data)
                if writer:
                    writer.write(data)
                    await writer.drain()
            return True
        return False  # delimited by close

    def answer(self, code, message, retry_after=None):
        text, reason = REASONS[code]
        body = status_body(code, reason, message, retry_after)
        extra = "Retry-After: %d\r\n" % retry_after if retry_after else ""
        self.cw.write(("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s"
                       "Content-Length: %d\r\n\r\n" % (code, text, extra, len(body))).encode() + body)
        self.link.stats["injected"] += 1

    async def run(self):
        try:
            while True:
                try:
                    head, reqline, headers = await self.read_head(self.cr)
                except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
                    return
                method = reqline.split(" ", 1)[0]
                body = bytearray()
                if "content-length" in headers:
                    body = await self.cr.readexactly(int(headers["content-length"]))
                elif headers.get("transfer-encoding", "").lower() == "chunked":
                    raise ConnectionError("chunked request bodies are not supported")
                self.link.stats["requests"] += 1
                k, p = self.link.fault_kind(), self.link.fault_arg(0, 0)
                hit = random.random() < p
                if k == "err429" and hit:
                    self.answer(429, "too many requests", retry_after=1)
                    await self.cw.drain()
                    continue
                if k == "err500" and hit:
                    self.answer(500, "internal error before the request was served")
                    await self.cw.drain()
                    continue
                if k == "err409" and hit and method in WRITES:
                    self.answer(409, "the object has been modified; please apply your changes "
                                "to the latest version and try again")
                    await self.cw.drain()
                    continue
                if self.uw is None or self.uw.is_closing():
                    self.ur, self.uw = await self.link.connect_upstream(self.link.tls)
                    if self.ur is None:
                        self.answer(500, "cannot reach the apiserver")
                        await self.cw.drain()
                        return
                self.uw.write(head + bytes(body))
                await self.uw.drain()
                rhead, status, rheaders = await self.read_head(self.ur)
                code = int(status.split(" ")[1])
                no_body = method == "HEAD" or code in (204, 304) or 100 <= code < 200
                if k == "err500after" and hit and method in WRITES:
                    # The apiserver did it; the answer says it failed.
                    framed = await self.relay_body(self.ur, None, rheaders, no_body)
                    self.answer(500, "internal error after the request was served")
                    await self.cw.drain()
                    if not framed:
                        return
                    continue
                if k == "slow":
                    await asyncio.sleep(self.link.fault_arg(0, 0) / 1e3)
                self.cw.write(rhead)
                await self.cw.drain()
                if not await self.relay_body(self.ur, self.cw, rheaders, no_body):
                    while True:
                        data = await self.ur.read(65536)
                        if not data:
                            return
                        self.cw.write(data)
                        await self.cw.drain()
                if rheaders.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError, ValueError,
                asyncio.LimitOverrunError):
            return
        finally:
            for w in (self.cw, self.uw):
                if w is not None:
                    w.transport.abort()
            self.link.conns.discard(self)


class Proxy:
    def __init__(self, args):
        self.args = args
        self.links = {}
        self.server_ctx = self.client_ctx = None
        if args.cert:
            self.server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.server_ctx.load_cert_chain(args.cert, args.key)
            self.server_ctx.set_alpn_protocols(["http/1.1"])
            self.client_ctx = ssl.create_default_context(cafile=args.ca)
            self.client_ctx.set_alpn_protocols(["http/1.1"])

    async def add(self, name, kind, upstreams):
        ups = []
        for u in upstreams:
            host, port = u.rsplit(":", 1)
            ups.append((host, int(port)))
        link = Link(name, kind, ups, self.client_ctx if kind == "http" else None)

        async def accepted(reader, writer):
            link.stats["accepted"] += 1
            conn = (TcpConn if kind == "tcp" else HttpConn)(link, reader, writer)
            link.conns.add(conn)
            await conn.run()

        ctx = self.server_ctx if kind == "http" else None
        link.server = await asyncio.start_server(accepted, "127.0.0.1", 0, ssl=ctx, backlog=128)
        link.port = link.server.sockets[0].getsockname()[1]
        self.links[name] = link
        return link.port

    async def command(self, words):
        if not words:
            raise ValueError("empty command")
        cmd, rest = words[0], words[1:]
        if cmd == "add":
            if rest[1] not in ("tcp", "http") or len(rest) < 3:
                raise ValueError("add NAME tcp|http UPSTREAM...")
            return "ok %d" % await self.add(rest[0], rest[1], rest[2:])
        if cmd == "stats":
            return json.dumps({n: l.stats for n, l in self.links.items()})
        link = self.links[rest[0]]
        if cmd == "target":
            link.target = int(rest[1])
        elif cmd == "where":
            return "ok %d" % link.target
        elif cmd == "balance":
            if rest[1] not in ("random", "target"):
                raise ValueError("balance NAME random|target")
            link.random = rest[1] == "random"
        elif cmd == "cut":
            for c in list(link.conns):
                c.reset()
        elif cmd == "fault":
            if rest[1] not in FAULTS:
                raise ValueError("unknown fault " + rest[1])
            link.set_fault((rest[1], rest[2:]))
        elif cmd == "heal":
            link.set_fault(None)
        else:
            raise ValueError("unknown command " + cmd)
        return "ok"

    async def control(self, reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            try:
                reply = await self.command(line.decode().split())
            except (ValueError, KeyError, IndexError) as e:
                reply = "error %s" % e
            if reply.startswith("ok") and line.split()[0] != b"stats":
                log(line.decode().strip())
            writer.write((reply + "\n").encode())
            await writer.drain()
        writer.close()

    async def main(self):
        srv = await asyncio.start_server(self.control, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        with open(self.args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(self.args.port_file + ".tmp", self.args.port_file)
        await asyncio.Event().wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--port-file", required=True, help="where the control port is written")
    ap.add_argument("--cert", help="certificate for http links (PEM)")
    ap.add_argument("--key", help="its key (PEM)")
    ap.add_argument("--ca", help="CA that signed the upstreams of http links")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random choices")
    args = ap.parse_args()
    random.seed(args.seed)
    try:
        asyncio.run(Proxy(args).main())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
