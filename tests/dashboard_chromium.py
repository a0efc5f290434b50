#!/usr/bin/env python3
"""The live dashboard (GET /dashboard) in a real browser: Debian's
headless Chromium.

Starts `ratewarden serve` on a free loopback port (memory store, an
admin key, `/ping` limited to 5 a minute), puts it under traffic from a
background thread (`GET /ping` as a few `X-Client-Key`s, so that some are
denied, and `POST /rate/check`), then loads the page in headless
Chromium and reads the DOM it dumps, as the page's script left it:

- with the admin key in the fragment (`/dashboard#admin-key=...`): the
  page says it loaded; the `ping` row counts allowed and denied
  requests; the `check` row is there; the store latency (mean, max of the
  last bucket) is numeric; the most denied keys include a `user-` key of
  `ping` with its denials;
- without a key: the same figures, no key rows, and a note that the admin
  key is needed; with a wrong key: a note that it was refused;
- a screenshot of the page is a PNG of some size (`--screenshot PATH`
  keeps it to look at);
- GET /dashboard is HTML that loads nothing from elsewhere, and GET
  /dashboard/data answers the JSON the page reads (top_denied null
  without a key, 403 with a wrong one).

    python3 tests/dashboard_chromium.py --bin target/release/ratewarden \
        [--chromium PATH] [--screenshot dashboard.png]

Chromium is `--chromium`, else `chromium`, `chromium-browser` or
`google-chrome` on PATH (scripts/install-chromium installs Debian's).
Exit status 0 when every case passed.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

from blackbox import free_port, stop_server

ADMIN_KEY = "dashboard-admin-key"
PING_LIMIT = 5
CLIENT_KEYS = [f"user-{n}" for n in range(1, 5)]
# Virtual time the page gets before the DOM is dumped: its first fetch and
# two polls after it (the page polls every 2 s). Virtual time stands still
# while a fetch is pending, so a slow server does not cut the page short.
VIRTUAL_TIME_MS = 5000
CHROMIUM_TIMEOUT_S = 60
TRIES = 5
# A 1280 × 1000 screenshot of an empty page is about 5 KB.
MIN_SCREENSHOT_BYTES = 20_000
CHROMIUM_NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]


def tail(text: str, lines: int = 15) -> str:
    # Debian's Chromium logs harmless D-Bus errors in a container.
    kept = [line for line in text.splitlines() if "dbus" not in line.lower()]
    return "\n".join(kept[-lines:])


# --- the server ---------------------------------------------------------------

class Server:
    """`ratewarden serve` on a free loopback port, memory store."""

    def __init__(self, binary: str, tmp: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "ratewarden.log"
        self.log = self.log_path.open("w")
        # The admin key is never a flag: only the environment sets it.
        env = dict(os.environ, RATEWARDEN_ADMIN_KEY=ADMIN_KEY, RATEWARDEN_LOG="warn")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--store", "memory",
             "--ping-limit", str(PING_LIMIT), "--ping-window", "60"],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)

    def text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def wait_until_healthy(self, seconds: float = 20) -> None:
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ratewarden exited with {self.proc.returncode}:\n{self.text()}")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
                    last = r.status
            except urllib.error.HTTPError as e:
                last = e.code
            except OSError as e:
                last = e
            time.sleep(0.05)
        raise AssertionError(f"GET /healthz did not answer 200 within {seconds} s (last: {last}):\n{self.text()}")

    def get(self, path: str, headers=None):
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def stop(self) -> None:
        stop_server(self.proc, self.log)
        if self.proc.returncode not in (0, -signal.SIGTERM):
            raise AssertionError(f"ratewarden exited with {self.proc.returncode}:\n{self.text()}")


class Traffic(threading.Thread):
    """Requests in a loop until stopped, bounded in time and count: each
    client key asks for /ping (5 a minute: most are denied), and two users
    post to /rate/check (10 a minute per user and endpoint)."""

    def __init__(self, base: str, seconds: float = 180, max_rounds: int = 3000):
        super().__init__(daemon=True)
        self.base, self.seconds, self.max_rounds = base, seconds, max_rounds
        self.stopping = threading.Event()
        self.seen = Counter()  # (route, status) -> count
        self.lock = threading.Lock()
        self.last_error = None

    def call(self, route: str, request: urllib.request.Request) -> None:
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            e.read()
            status = e.code
        except OSError as e:
            self.last_error = f"{route}: {e}"
            status = "error"
        with self.lock:
            self.seen[(route, status)] += 1

    def run(self) -> None:
        deadline = time.time() + self.seconds
        for n in range(self.max_rounds):
            if self.stopping.is_set() or time.time() > deadline:
                return
            for key in CLIENT_KEYS:
                self.call("/ping", urllib.request.Request(
                    f"{self.base}/ping", headers={"X-Client-Key": key}))
            self.call("/rate/check", urllib.request.Request(
                f"{self.base}/rate/check", method="POST",
                data=json.dumps({"endpoint": "/api/a"}).encode(),
                headers={"X-User-Id": str(1 + n % 2), "Content-Type": "application/json"}))
            self.stopping.wait(0.05)

    def count(self, route: str, status) -> int:
        with self.lock:
            return self.seen[(route, status)]

    def wait_for(self, wanted, seconds: float = 15) -> None:
        """Waits until every (route, status) in `wanted` was answered."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if all(self.count(route, status) > 0 for route, status in wanted):
                return
            time.sleep(0.05)
        with self.lock:
            seen = dict(self.seen)
        raise AssertionError(f"traffic did not get {wanted} within {seconds} s: saw {seen}"
                             f" (last error: {self.last_error})")

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


# --- Chromium -------------------------------------------------------------------

def find_chromium(given) -> str:
    if given:
        return given
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit(f"no Chromium on PATH ({', '.join(CHROMIUM_NAMES)}): "
                     "scripts/install-chromium installs Debian's chromium package")


class Chromium:
    """One headless Chromium process per page load, each with a fresh
    profile (so no sessionStorage or cache carries over)."""

    def __init__(self, binary: str, tmp: Path):
        self.binary, self.tmp, self.runs = binary, tmp, 0

    def run(self, url: str, *action: str):
        self.runs += 1
        args = [self.binary, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--hide-scrollbars", "--window-size=1280,1000",
                # The page's console on stderr: script errors, CSP refusals.
                "--enable-logging=stderr", "--v=0",
                f"--user-data-dir={self.tmp / f'chromium-profile-{self.runs}'}",
                f"--virtual-time-budget={VIRTUAL_TIME_MS}", *action, url]
        started = time.time()
        # Its own session, so a hung browser is ended with every process it
        # started (renderer, zygote) and nothing else.
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            raise AssertionError(f"chromium did not finish within {CHROMIUM_TIMEOUT_S} s:\n{tail(err)}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, out, err, time.time() - started

    def dump_dom(self, url: str):
        code, out, err, took = self.run(url, "--dump-dom")
        if code != 0 or "<body" not in out:
            raise AssertionError(f"chromium --dump-dom exited with {code} after {took:.1f} s,"
                                 f" {len(out)} characters:\n{tail(err)}")
        errors = [line for line in err.splitlines() if ":CONSOLE" in line and (
            "Uncaught" in line or "Refused to" in line or "Content Security Policy" in line)]
        if errors:
            raise AssertionError("the page's console has errors:\n" + "\n".join(errors))
        return Page(out)


# --- the dumped DOM -------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent=None):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(
            Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def fields(row: Node) -> dict:
    """The text of a row's figures by data-field (not its chart)."""
    return {n.attrs["data-field"]: n.text().strip() for n in row.iter()
            if "data-field" in n.attrs and n.attrs["data-field"] != "chart"}


class Page:
    """What a test reads from the dashboard's DOM."""

    def __init__(self, html: str):
        builder = TreeBuilder()
        builder.feed(html)
        builder.close()
        nodes = list(builder.root.iter())
        self.body = next((n for n in nodes if n.tag == "body"), Node("body", {}))
        self.by_id = {n.attrs["id"]: n for n in nodes if "id" in n.attrs}
        self.policies = {n.attrs["data-policy"]: fields(n)
                         for n in nodes if n.tag == "tr" and "data-policy" in n.attrs}
        self.top_keys = [fields(n) for n in nodes if n.tag == "tr" and "data-top-key" in n.attrs]

    def text(self, element_id: str):
        node = self.by_id.get(element_id)
        return None if node is None else node.text().strip()

    def summary(self) -> str:
        return (f"  body: {self.body.attrs}\n  status: {self.text('status')!r}\n"
                f"  updated-at: {self.text('updated-at')!r}\n  policies: {self.policies}\n"
                f"  store: mean {self.text('store-mean-ms')!r} ms, max {self.text('store-max-ms')!r} ms\n"
                f"  top keys: {self.top_keys}\n  keys note: {self.text('top-keys-status')!r}")


def number(page: Page, text, what: str, kind=int):
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise AssertionError(f"{what} is {text!r}, not a number\n{page.summary()}") from None


def until_shown(chromium: Chromium, url: str, check) -> Page:
    """Loads `url` until `check(page)` passes, TRIES times at most: the
    traffic keeps running, so a figure still missing may come."""
    last = None
    for attempt in range(1, TRIES + 1):
        try:
            page = chromium.dump_dom(url)
            check(page)
            return page
        except AssertionError as e:
            last = f"try {attempt}: {e}"
            time.sleep(1)
    raise AssertionError(f"no try of {TRIES} passed; the last one:\n{last}")


# --- the cases ------------------------------------------------------------------

def expect_loaded_with_policies(page: Page) -> None:
    assert page.body.attrs.get("data-loaded") == "true", \
        f"<body data-loaded> is {page.body.attrs.get('data-loaded')!r}, not 'true'\n{page.summary()}"
    ping = page.policies.get("ping")
    assert ping is not None, f"no <tr data-policy=\"ping\">\n{page.summary()}"
    for field in ("allowed", "denied", "shadow_denied", "failed_open"):
        number(page, ping.get(field), f"ping's {field}")
    assert number(page, ping["allowed"], "ping's allowed") > 0, f"ping allowed nothing\n{page.summary()}"
    assert number(page, ping["denied"], "ping's denied") > 0, f"ping denied nothing\n{page.summary()}"
    check = page.policies.get("check")
    assert check is not None, f"no <tr data-policy=\"check\">\n{page.summary()}"
    assert number(page, check.get("allowed"), "check's allowed") > 0, f"check allowed nothing\n{page.summary()}"
    mean = number(page, page.text("store-mean-ms"), "#store-mean-ms", float)
    peak = number(page, page.text("store-max-ms"), "#store-max-ms", float)
    assert 0 <= mean <= peak, f"store latency mean {mean} ms, max {peak} ms\n{page.summary()}"
    updated = page.text("updated-at")
    assert updated and updated != "never", f"#updated-at is {updated!r}\n{page.summary()}"
    assert page.by_id["status"].attrs.get("data-state") == "ok", \
        f"the status line is not ok\n{page.summary()}"


def the_page_with_the_admin_key_shows_figures_and_the_most_denied_keys(server, chromium, _):
    def check(page: Page) -> None:
        expect_loaded_with_policies(page)
        assert page.top_keys, f"no <tr data-top-key> rows with the admin key\n{page.summary()}"
        for row in page.top_keys:
            number(page, row.get("denied"), f"the denials of key {row.get('key')!r}")
        users = [r for r in page.top_keys
                 if r.get("policy") == "ping" and r.get("key", "").startswith("user-") and int(r["denied"]) > 0]
        assert users, f"no denied user- key of ping among the top keys\n{page.summary()}"
        assert "hidden" not in page.by_id["top-keys"].attrs, f"the key table is hidden\n{page.summary()}"
    until_shown(chromium, f"{server.base}/dashboard#admin-key={ADMIN_KEY}", check)


def the_page_without_a_key_shows_figures_but_no_keys(server, chromium, _):
    def check(page: Page) -> None:
        expect_loaded_with_policies(page)
        assert not page.top_keys, f"key rows without the admin key: {page.top_keys}"
        note = page.text("top-keys-status") or ""
        assert "admin key" in note and "needed" in note, \
            f"the key area does not say the admin key is needed: {note!r}"
    until_shown(chromium, f"{server.base}/dashboard", check)


def a_wrong_admin_key_is_said_to_be_refused(server, chromium, _):
    def check(page: Page) -> None:
        expect_loaded_with_policies(page)
        assert not page.top_keys, f"key rows with a wrong admin key: {page.top_keys}"
        note = page.by_id.get("top-keys-status")
        assert note is not None and note.attrs.get("data-state") == "refused" and "refused" in note.text(), \
            f"the key area does not say the key was refused\n{page.summary()}"
    until_shown(chromium, f"{server.base}/dashboard#admin-key=not-{ADMIN_KEY}", check)


def a_screenshot_of_the_page_is_a_png_of_some_size(server, chromium, args):
    path = Path(args.screenshot) if args.screenshot else chromium.tmp / "dashboard.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    last = None
    for attempt in range(1, TRIES + 1):
        path.unlink(missing_ok=True)
        code, _, err, took = chromium.run(f"{server.base}/dashboard#admin-key={ADMIN_KEY}",
                                          f"--screenshot={path.resolve()}")
        size = path.stat().st_size if path.exists() else 0
        if code == 0 and size >= MIN_SCREENSHOT_BYTES:
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
            return
        last = f"try {attempt}: exit {code} after {took:.1f} s, {size} bytes:\n{tail(err)}"
        time.sleep(1)
    raise AssertionError(f"no screenshot of at least {MIN_SCREENSHOT_BYTES} bytes; the last try:\n{last}")


def the_page_and_its_data_are_served_as_the_page_expects(server, _chromium, _):
    status, headers, body = server.get("/dashboard")
    assert status == 200, f"GET /dashboard: {status}"
    assert headers.get("Content-Type", "").startswith("text/html"), \
        f"GET /dashboard: Content-Type {headers.get('Content-Type')!r}"
    html = body.decode()
    # Self-contained: nothing loaded from elsewhere (the SVG namespace is a name, not a fetch).
    outside = [u for u in re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"'<>)]*", html)
               if not u.endswith("www.w3.org/2000/svg")]
    assert not outside, f"GET /dashboard refers to other sites: {outside}"
    status, headers, body = server.get("/dashboard/data")
    assert status == 200, f"GET /dashboard/data: {status} {body[:300]!r}"
    assert headers.get("Content-Type", "").startswith("application/json"), \
        f"GET /dashboard/data: Content-Type {headers.get('Content-Type')!r}"
    data = json.loads(body)
    for key in ("now", "bucket_seconds", "store", "store_ready", "policies", "store_latency", "top_denied"):
        assert key in data, f"GET /dashboard/data has no {key!r}: {sorted(data)}"
    assert data["top_denied"] is None, f"top_denied without a key: {data['top_denied']!r}"
    names = [p["name"] for p in data["policies"]]
    assert "ping" in names and "check" in names, f"policies: {names}"
    status, _, body = server.get("/dashboard/data", {"X-Admin-Key": ADMIN_KEY})
    assert status == 200, f"GET /dashboard/data with the admin key: {status} {body[:300]!r}"
    assert isinstance(json.loads(body)["top_denied"], list), "top_denied with the admin key is not a list"
    status, _, body = server.get("/dashboard/data", {"X-Admin-Key": "not-" + ADMIN_KEY})
    assert status == 403, f"GET /dashboard/data with a wrong admin key: {status}, expected 403"


CASES = [
    the_page_and_its_data_are_served_as_the_page_expects,
    the_page_with_the_admin_key_shows_figures_and_the_most_denied_keys,
    the_page_without_a_key_shows_figures_but_no_keys,
    a_wrong_admin_key_is_said_to_be_refused,
    a_screenshot_of_the_page_is_a_png_of_some_size,
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the ratewarden binary")
    parser.add_argument("--chromium", help="the Chromium binary (default: chromium, chromium-browser"
                                           " or google-chrome on PATH)")
    parser.add_argument("--screenshot", help="where to keep the screenshot (default: a temporary file)")
    args = parser.parse_args()
    chromium_bin = find_chromium(args.chromium)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        chromium = Chromium(chromium_bin, tmp)
        server = Server(args.bin, tmp)
        traffic = None
        try:
            server.wait_until_healthy()
            traffic = Traffic(server.base)
            traffic.start()
            traffic.wait_for([("/ping", 200), ("/ping", 429), ("/rate/check", 200)])
            for case in CASES:
                started = time.time()
                try:
                    case(server, chromium, args)
                    print(f"ok   {case.__name__} ({time.time() - started:.1f} s)")
                except Exception:  # noqa: BLE001 - every failure is reported
                    failures += 1
                    print(f"FAIL {case.__name__}\n{traceback.format_exc()}")
        except Exception:  # noqa: BLE001 - the server or the traffic did not start
            failures += 1
            print(f"FAIL setup\n{traceback.format_exc()}")
        finally:
            if traffic is not None:
                traffic.stop()
            try:
                server.stop()
            except AssertionError as e:
                failures += 1
                print(f"FAIL stop\n{e}")
    print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
