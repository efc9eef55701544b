#!/usr/bin/env python3
"""Drives one headless Chromium page through the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on fd 3, answers on fd 4, each a JSON text
ended by NUL), with the standard library only.

Usage: page_driver.py BROWSER PROFILE_DIR STEP...

The steps run in order; the first failing one ends the run with exit 1 and
what the page shows (its state line and message) on stderr.
  open=URL       navigates and waits until the document is complete
  wait=EXPR      evaluates EXPR every 50 ms until it is truthy (20 s at most)
  eval=EXPR      evaluates EXPR once
  print=EXPR     prints EXPR's value on one line of stdout
  token=FILE     pastes the content of FILE into the page's token field and
                 submits its form, as a viewer would (the token is read from
                 a file so that it never appears in a command line)
  viewport=W,H   emulates a W x H CSS pixel viewport (a phone at 390,844), with
                 touch and a device scale factor of 2 below 600 px
  scheme=light|dark  emulates prefers-color-scheme
  shot=FILE      saves a PNG screenshot of the whole page into FILE
"""
import base64
import fcntl
import json
import os
import select
import subprocess
import sys
import time

WAIT_S = 20


def high(fd):
    """fd moved to a number above 9."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, browser, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # The browser's ends above fd 4, so that placing them there clobbers none.
        to_chrome_r, from_chrome_w = (high(to_chrome_r), high(from_chrome_w))
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--remote-debugging-pipe",
                 "--user-data-dir=" + profile, "about:blank"]
        # The pipe ends go to fds 3 and 4 of the browser (bash: dash redirects no fd above 9).
        shell = 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (
            to_chrome_r, from_chrome_w, to_chrome_r, from_chrome_w)
        self.proc = subprocess.Popen(["bash", "-c", shell, browser] + flags,
                                     pass_fds=(to_chrome_r, from_chrome_w),
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(profile, "chromium.log"), "w"))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def close(self):
        self.proc.kill()
        self.proc.wait()

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_chrome], [], [], left)[0]:
                raise RuntimeError("the browser did not answer in time")
            chunk = os.read(self.from_chrome, 65536)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + WAIT_S
        while True:
            answer = self._read(deadline)
            if answer.get("id") != self.next_id:
                continue  # an event, or an answer to nothing we wait for
            if "error" in answer:
                raise RuntimeError("%s: %s" % (method, answer["error"]))
            return answer["result"]

    def attach(self):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target["targetId"], "flatten": True},
                                 session=False)["sessionId"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate",
                      {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"].get("exception", {})
                                           .get("description", r["exceptionDetails"]["text"])))
        return r["result"].get("value")

    def wait(self, expr):
        deadline = time.monotonic() + WAIT_S
        while not self.eval(expr):
            if time.monotonic() > deadline:
                raise RuntimeError("not within %d s: %s" % (WAIT_S, expr))
            time.sleep(0.05)


SHOWN = ("(function(){function t(id){var e=document.getElementById(id);"
         "return e?(e.hidden?'(hidden) ':'')+e.textContent:'(none)';}"
         "return 'state: '+t('state')+' | error: '+t('error')+' | empty: '+t('empty');})()")


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    b = Browser(argv[1], argv[2])
    try:
        b.attach()
        for step in argv[3:]:
            kind, _, arg = step.partition("=")
            if kind == "open":
                b.call("Page.navigate", {"url": arg})
                b.wait("location.href==%s&&document.readyState=='complete'" % json.dumps(arg))
            elif kind == "wait":
                b.wait(arg)
            elif kind == "eval":
                b.eval(arg)
            elif kind == "print":
                print(b.eval(arg), flush=True)
            elif kind == "token":
                with open(arg) as f:
                    tok = f.read().strip()
                b.eval("(function(t){document.getElementById('token').value=t;"
                       "document.getElementById('auth').requestSubmit();})(%s)" % json.dumps(tok))
            elif kind == "viewport":
                w, h = (int(v) for v in arg.split(","))
                phone = w < 600
                b.call("Emulation.setDeviceMetricsOverride",
                       {"width": w, "height": h, "deviceScaleFactor": 2 if phone else 1,
                        "mobile": phone})
            elif kind == "scheme":
                b.call("Emulation.setEmulatedMedia",
                       {"features": [{"name": "prefers-color-scheme", "value": arg}]})
            elif kind == "shot":
                png = b.call("Page.captureScreenshot",
                             {"format": "png", "captureBeyondViewport": True})["data"]
                with open(arg, "wb") as f:
                    f.write(base64.b64decode(png))
            else:
                raise RuntimeError("unknown step " + step)
        return 0
    except RuntimeError as e:
        shown = ""
        try:
            shown = b.eval(SHOWN)
        except RuntimeError:
            pass
        sys.stderr.write("page_driver: %s\n  the page shows: %s\n" % (e, shown))
        return 1
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
