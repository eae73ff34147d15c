"""A page opened in a real headless Chromium (Debian's `chromium`), driven over the
DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ending in NUL on
file descriptors 3 and 4), so no extra package and no network port are needed.

`open_page` loads a file, waits for its load event and answers what a person would
see: console errors and uncaught exceptions, every request the page made, each image
with its natural width, and a full-page screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
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

IMAGES = "Array.from(document.images).map(i => ({src: i.src, complete: i.complete, width: i.naturalWidth}))"


def chromium() -> str:
    """The browser's path; a missing browser fails the test (CI installs it: .ci/run)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise AssertionError(
            "chromium is not installed: apt-get install -y chromium (make test does, by checks/chromium.sh)"
        )
    return found


@dataclass
class PageSeen:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    images: list[dict[str, Any]] = field(default_factory=list)
    screenshot: bytes = b""
    text: str = ""  # document.body.innerText


class _Pipe:
    def __init__(self, to_browser: int, from_browser: int) -> None:
        self.to_browser, self.from_browser = to_browser, from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise AssertionError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise AssertionError("chromium closed its DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, attached: str | None = None, timeout: float = 30, **params: Any) -> Any:
        self.next_id += 1
        request: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if attached:  # the DevTools id of the page this command is for
            request["sessionId"] = attached
        os.write(self.to_browser, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._message(deadline)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method} failed: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {}).get("description", "")
            found.append(f"exception: {details.get('text')} {thrown}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            found.append(f"load failed: {params.get('errorText')}")
    return found


def open_page(path: Path, width: int = 1280, height: int = 900) -> PageSeen:
    """Load `path` in headless Chromium and report what it saw."""
    browser_in, ours_out = os.pipe()  # we write commands; chromium reads them on fd 3
    ours_in, browser_out = os.pipe()  # chromium writes answers on fd 4
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        "about:blank",
    ]

    def fds() -> None:
        # Move both ends clear of 3 and 4 first: either may be one of them already.
        reading, writing = (fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (browser_in, browser_out))
        os.dup2(reading, 3)  # dup2 leaves the copies inheritable; the originals close on exec
        os.dup2(writing, 4)

    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=fds,
        close_fds=False,  # keep 3 and 4; every other descriptor here is close-on-exec
    )
    os.close(browser_in)
    os.close(browser_out)
    pipe = _Pipe(ours_out, ours_in)
    try:
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        attached = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.call(f"{domain}.enable", attached)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            attached,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        pipe.events.clear()
        pipe.call("Page.navigate", attached, url=path.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired")
        seen = PageSeen()
        seen.images = pipe.call("Runtime.evaluate", attached, expression=IMAGES, returnByValue=True)[
            "result"
        ]["value"]
        seen.text = pipe.call(
            "Runtime.evaluate", attached, expression="document.body.innerText", returnByValue=True
        )["result"]["value"]
        shot = pipe.call("Page.captureScreenshot", attached, format="png", captureBeyondViewport=True)
        seen.screenshot = base64.b64decode(shot["data"])
        seen.errors = _errors(pipe.events)
        seen.requests = [
            e["params"]["request"]["url"]
            for e in pipe.events
            if e.get("method") == "Network.requestWillBeSent"
        ]
        return seen
    finally:
        with contextlib.suppress(AssertionError, OSError):
            pipe.call("Browser.close", timeout=10)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(ours_out)
        os.close(ours_in)
        shutil.rmtree(profile, ignore_errors=True)
