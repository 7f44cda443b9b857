"""Debian's chromium, headless, driven through the DevTools protocol over a
pipe (--remote-debugging-pipe: JSON messages ended by a NUL byte, read by
the browser on descriptor 3 and written on 4), for the tests of the HTML
reports: load a page and collect what its console said, what it tried to
fetch, its DOM, a screenshot and a PDF.
SPDX-License-Identifier: MIT
"""
import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe"]


class Chromium:
    """One browser, a fresh profile, stopped by close()."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="volley-chromium-")
        to_browser, self.out = os.pipe()
        self.inp, from_browser = os.pipe()

        def descriptors():
            # The browser reads 3 and writes 4 (dup2 leaves them open at exec,
            # the others close); first out of the way, as the pipes may be 3
            # or 4 themselves.
            reads, writes = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        self.proc = subprocess.Popen(
            [shutil.which("chromium") or "chromium", *FLAGS, f"--user-data-dir={self.profile}",
             "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=descriptors)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer, self.next_id, self.events = b"", 0, []

    def _message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=60):
        """A command's result; the events that came meanwhile are kept."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))

    def open(self, path, width=1000, height=800, mobile=False, media=None):
        """A new tab showing the file at path."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
                  session=session)
        if media:
            self.send("Emulation.setEmulatedMedia", {"media": media}, session=session)
        self.events = []
        self.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
        self.wait_for("Page.loadEventFired")
        return Tab(self, session, self.events)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.out)
        os.close(self.inp)
        shutil.rmtree(self.profile, ignore_errors=True)


class Tab:
    def __init__(self, browser, session, events):
        self.browser, self.session, self.events = browser, session, events

    def eval(self, expression):
        """The value of a JavaScript expression in the page (the protocol
        evaluates it; the page itself runs no script)."""
        result = self.browser.send("Runtime.evaluate", {"expression": expression,
                                                        "returnByValue": True},
                                   session=self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self):
        """Console messages, script errors and log entries of level warning
        or error, as text."""
        out = []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled":
                out.append(f"console.{p['type']}: {p.get('args')}")
            elif method == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and p["entry"]["level"] in ("warning", "error"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']}")
        return out

    def requests(self):
        """The URL of every request the page made, its own first."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self):
        """The page as PNG bytes, all of it."""
        data = self.browser.send("Page.captureScreenshot", {"format": "png",
                                                            "captureBeyondViewport": True},
                                 session=self.session)["data"]
        return base64.b64decode(data)

    def pdf(self):
        return base64.b64decode(self.browser.send("Page.printToPDF", {},
                                                  session=self.session)["data"])
