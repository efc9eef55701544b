#!/usr/bin/env python3
"""A bogus-token flood against kubeleased, with valid callers beside it.

Usage: review_flood.py PORT SECONDS NS LEASE KNOWN_TOKEN_FILE NEW_TOKEN_FILE

- CONNS (100) threads from 127.0.0.3, one kept-alive connection each (made
  again when the server closes it), send GetHolder with a fresh random
  bearer token every time, as fast as they are answered;
- a known caller (KNOWN_TOKEN_FILE, already reviewed: the caller made one
  call before) from 127.0.0.1 calls GetHolder every 100 ms throughout;
- a new caller (NEW_TOKEN_FILE, never seen) from 127.0.0.2 makes its first
  call halfway through, then one every 100 ms.

Prints one JSON object: the flood's HTTP statuses and the first message of
each Connect code, and each valid caller's statuses and first failure.
Sourced by tests/integration/test_review_flood.sh and bench/review_flood.sh.
"""
import http.client
import json
import os
import secrets
import sys
import threading
import time

CONNS = int(os.environ.get("KL_FLOOD_CONNS", "100"))
port, seconds, ns, lease = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
known = open(sys.argv[5]).read().strip()
new = open(sys.argv[6]).read().strip()
body = json.dumps({"namespace": ns, "name": lease})
deadline = time.monotonic() + seconds
lock = threading.Lock()
flood = {"statuses": {}, "messages": {}, "requests": 0}
callers = {}


def call(conn, token):
    conn.request("POST", "/kubelease.v1.LeaseService/GetHolder", body,
                 {"Content-Type": "application/json", "Authorization": "Bearer " + token})
    r = conn.getresponse()
    data = r.read()
    return r.status, data


def connect(src):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))


def flooder():
    conn = connect("127.0.0.3")
    while time.monotonic() < deadline:
        try:
            status, data = call(conn, "bogus." + secrets.token_urlsafe(48))
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = connect("127.0.0.3")
            continue
        with lock:
            flood["requests"] += 1
            flood["statuses"][status] = flood["statuses"].get(status, 0) + 1
            if status != 200 and status not in flood["messages"]:
                try:
                    flood["messages"][status] = json.loads(data).get("message", "")
                except ValueError:
                    flood["messages"][status] = data[:200].decode(errors="replace")


def caller(name, token, src, start):
    while time.monotonic() < start:
        time.sleep(0.01)
    got = {"statuses": {}, "first_failure": None, "calls": 0}
    conn = connect(src)
    while time.monotonic() < deadline:
        try:
            status, data = call(conn, token)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            conn = connect(src)
            status, data = -1, str(e).encode()
        got["calls"] += 1
        got["statuses"][status] = got["statuses"].get(status, 0) + 1
        # 200 (held) or 404 (not held): authorized either way.
        if status not in (200, 404) and got["first_failure"] is None:
            got["first_failure"] = "%d %s" % (status, data[:300].decode(errors="replace"))
        time.sleep(0.1)
    callers[name] = got


threads = [threading.Thread(target=flooder) for _ in range(CONNS)]
threads.append(threading.Thread(target=caller, args=("known", known, "127.0.0.1", 0)))
threads.append(threading.Thread(target=caller,
                                args=("new", new, "127.0.0.2", time.monotonic() + seconds / 2)))
t0 = time.monotonic()
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"seconds": time.monotonic() - t0, "flood": flood, "callers": callers}))
