"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
messages ending in NUL on fds 3 and 4), with no package beyond the standard library: load a page,
collect its console messages, exceptions and network requests, evaluate JavaScript, take a
screenshot. Finds Debian's `chromium` (apt install chromium), Chrome, or CHROMIUM=path."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find() -> str | None:
    """The Chromium executable, or None."""
    given = os.environ.get("CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageRun:
    """What loading a page showed."""

    console: list[dict[str, Any]] = field(default_factory=list)  # {level, text}
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    values: dict[str, Any] = field(default_factory=dict)  # expression -> its value
    screenshot: bytes = b""

    @property
    def errors(self) -> list[str]:
        return self.exceptions + [
            m["text"] for m in self.console if m["level"] in ("error", "assert")
        ]


class _Pipe:
    def __init__(self, exe: str, profile: str) -> None:
        to_r, self._to_w = os.pipe()  # we write commands; Chromium reads fd 3
        self._from_r, from_w = os.pipe()  # Chromium writes fd 4; we read

        def fds() -> None:
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",  # CI runs as root in a container
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds,  # only dup2 between fork and exec
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        reply = self._until(lambda m: m.get("id") == self._id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def wait_event(self, method: str, timeout: float) -> None:
        if not any(e.get("method") == method for e in self.events):
            self._until(lambda m: m.get("method") == method, timeout)

    def _until(self, done: Any, timeout: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                m: dict[str, Any] = json.loads(raw)
                if done(m):
                    return m
                self.events.append(m)
            left = end - time.monotonic()
            ready, _, _ = select.select([self._from_r], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buf += chunk

    def close(self) -> None:
        with contextlib.suppress(Exception):  # it may be gone already
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_w)
        os.close(self._from_r)


def load(
    page: Path, expressions: tuple[str, ...] = (), width: int = 1280, timeout: float = 60.0
) -> PageRun:
    """Open `page` (a local file) in headless Chromium, wait for its load event, evaluate each
    expression (its JSON value kept) and take a full-page PNG screenshot."""
    exe = find()
    if exe is None:
        raise FileNotFoundError("no Chromium found (apt install chromium)")
    with tempfile.TemporaryDirectory(prefix="stallscope-chromium-") as profile:
        pipe = _Pipe(exe, profile)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            sid = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Page", "Network"):
                pipe.call(f"{domain}.enable", session=sid)
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=sid,
            )
            pipe.call("Page.navigate", {"url": page.resolve().as_uri()}, session=sid)
            pipe.wait_event("Page.loadEventFired", timeout)
            run = PageRun()
            for e in expressions:
                got = pipe.call(
                    "Runtime.evaluate", {"expression": e, "returnByValue": True}, session=sid
                )
                run.values[e] = got.get("result", {}).get("value")
            shot = pipe.call(
                "Page.captureScreenshot",
                {"format": "png", "captureBeyondViewport": True},
                session=sid,
            )
            run.screenshot = base64.b64decode(shot["data"])
        finally:
            pipe.close()
    for e in pipe.events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            run.console.append({"level": p["type"], "text": text})
        elif method == "Log.entryAdded":
            run.console.append({"level": p["entry"]["level"], "text": p["entry"]["text"]})
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            run.exceptions.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Network.requestWillBeSent":
            run.requests.append(p["request"]["url"])
    return run
