#!/usr/bin/env python3
"""Forward auth behind real proxies: Debian's nginx (auth_request) and
Caddy (forward_auth, written out as reverse_proxy + handle_response) in
front of `ratewarden serve`'s /v1/authorize, with the configs of
tests/proxies/ that docs/forward-auth.md quotes.

For each proxy: a fresh `ratewarden serve --store memory` trusting only
127.0.0.1 (the proxy), one policy of 3 requests an hour per client_ip on
/api/*, an application (an HTTP server in this process that counts what
reaches it), and clients on distinct loopback addresses (Linux routes all
of 127.0.0.0/8 to lo, so a client binds 127.0.0.2, 127.0.0.3, ...). The
cases check that:

- a client gets 3 answers from the application, each with RateLimit
  (r=2, 1, 0), then a 429 with Retry-After, RateLimit, RateLimit-Policy
  and a problem-details body, and the application saw exactly 3;
- another client has its own 3 (the key comes through the proxy's
  X-Forwarded-For);
- an X-Forwarded-For sent by a client never becomes the key: two clients
  spoofing one value keep their own counters, and spoofing an exhausted
  client's address does not get the spoofer refused;
- a client's own X-Ratewarden-Deny-Status does not turn its 429 into a
  401 or 403;
- a path no policy matches always passes, without RateLimit headers;
- the application's own 403 reaches the client as a 403 (nginx maps only
  ratewarden's 403 to a 429), and a request body reaches the application;
- every spelling of a limited path (/%61pi/x, //api/x, /x/../api/x,
  /api%2Fx, /api;p/x) counts against its one counter, and after the 429s
  none reaches the application; spellings with no single meaning (an
  encoded dot segment, a backslash, NUL) are refused and never reach it;
- ratewarden reads each path of a corpus as nginx does (its $uri, from an
  nginx of the test's own), or refuses it;
- no refused request reached the application;
- with ratewarden stopped, the configurations as shipped fail open (the
  request, its body too, reaches the application) and without their
  fail-open lines fail closed (nginx 500, Caddy 502).

    python3 tests/proxies.py --bin target/release/ratewarden \\
        --nginx /usr/sbin/nginx --caddy /usr/bin/caddy

scripts/install-proxies installs both. Exit status 0 when every case
passed.
"""

import argparse
import collections
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from blackbox import avoid_window_edge, free_port, stop_server

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "proxies"
LIMIT = 3
WINDOW_SECS = 3600  # POLICY's window
# A generous bound on one case's time (a few requests, each within TIMEOUT).
CASE_SECS = 30
TIMEOUT = 5
POLICY = f"""\
[[policies]]
name = "per-client"
algorithm = "fixed_window"
limit = {LIMIT}
window = "1h"
key = ["client_ip"]
match = {{ path = "/api/*" }}
"""
RATE_LIMIT_HEADERS = ("RateLimit", "RateLimit-Policy", "X-RateLimit-Limit",
                      "X-RateLimit-Remaining", "X-RateLimit-Reset")


# ---------------------------------------------------------------- processes


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def wait_until_ready(name, proc, port, log_path, probe=None, seconds=10):
    """Waits for `proc` to accept connections on 127.0.0.1:`port` (and for
    `probe()` to be true, when given); fails with its log's tail."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}:\n{tail(log_path)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
            if probe is None or probe():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{name} did not get ready on port {port} within {seconds} s:\n"
                         f"{tail(log_path)}")


class Proxy:
    """nginx or caddy from a rendered template in a directory of its own."""

    def __init__(self, name, argv, port, directory: Path, env=None):
        self.name, self.port = name, port
        self.log_path = directory / f"{name}.log"
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            wait_until_ready(name, self.proc, port, self.log_path)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
                    raise AssertionError(f"{self.name} did not stop within 10 s of SIGTERM")
        finally:
            self.log.close()


# The fail-open lines of each template: removed, the configuration fails
# closed.
FAIL_OPEN = {
    "nginx.conf.template": re.compile(r"\n *error_page 502 504 = @ratewarden_down;"),
    "Caddyfile.template": re.compile(r"\n\t# Fail open:.*?\n\thandle_errors \{.*?\n\t\}", re.S),
}


def render(template: str, directory: Path, values: dict, fail_open=True) -> Path:
    text = (TEMPLATES / template).read_text()
    if not fail_open:
        text, removed = FAIL_OPEN[template].subn("", text)
        assert removed == 1, f"{template}: the fail-open lines were not found"
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", str(value))
    left = re.findall(r"\{\{\w+\}\}", text)
    assert not left, f"{template}: unfilled {left}"
    path = directory / template.removesuffix(".template")
    path.write_text(text)
    return path


def start_nginx(binary, tmp: Path, app_port, ratewarden_port, fail_open=True) -> Proxy:
    name = "nginx" if fail_open else "nginx-fail-closed"
    directory = tmp / name
    directory.mkdir()
    # As root, nginx's workers run as nobody; they must reach the temp dirs.
    directory.chmod(0o755)
    port = free_port()
    conf = render("nginx.conf.template", directory, {
        "LISTEN": f"127.0.0.1:{port}", "APP": f"127.0.0.1:{app_port}",
        "RATEWARDEN": f"127.0.0.1:{ratewarden_port}"}, fail_open)
    return Proxy(name, [binary, "-p", f"{directory}/", "-e", str(directory / "error.log"),
                        "-c", str(conf), "-g", "daemon off;"], port, directory)


def start_caddy(binary, tmp: Path, app_port, ratewarden_port, fail_open=True) -> Proxy:
    name = "caddy" if fail_open else "caddy-fail-closed"
    directory = tmp / name
    directory.mkdir()
    port = free_port()
    conf = render("Caddyfile.template", directory, {
        "PORT": port, "APP": f"127.0.0.1:{app_port}",
        "RATEWARDEN": f"127.0.0.1:{ratewarden_port}", "DIR": directory}, fail_open)
    env = dict(os.environ, HOME=str(directory), XDG_CONFIG_HOME=str(directory / "config"),
               XDG_DATA_HOME=str(directory / "data"))
    return Proxy(name, [binary, "run", "--config", str(conf), "--adapter", "caddyfile"],
                 port, directory, env=env)


class Ratewarden:
    """`ratewarden serve` with `policy` (POLICY), trusting only 127.0.0.1."""

    def __init__(self, binary, tmp: Path, policy=POLICY, name="ratewarden"):
        self.port = free_port()
        config = tmp / f"{name}.toml"
        config.write_text(policy)
        self.log_path = tmp / f"{name}.log"
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--store", "memory",
             "--config", str(config), "--trusted-proxy", "127.0.0.1/32"],
            env=dict(os.environ, RATEWARDEN_LOG="info"), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            wait_until_ready("ratewarden", self.proc, self.port, self.log_path, self.ready)
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            c.request("GET", "/readyz")
            r = c.getresponse()
            r.read()
            return r.status == 200
        finally:
            c.close()

    def stop(self):
        stop_server(self.proc, self.log)


class App:
    """The application behind the proxy: counts every request it gets by
    (method, request target as received) and answers 200 `upstream ok`
    (403 on */forbidden)."""

    def __init__(self):
        self.seen = collections.Counter()
        self.bodies = []
        self.lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                # The target as received: http.server rewrites a leading
                # `//` in self.path.
                path = self.requestline.split(" ")[1]
                with app.lock:
                    app.seen[(self.command, path)] += 1
                    if body:
                        app.bodies.append((path, body))
                status, text = (403, b"app forbids") if self.path.endswith("/forbidden") \
                    else (200, b"upstream ok")
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def count(self, method, path) -> int:
        with self.lock:
            return self.seen[(method, path)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------- clients


class Answer:
    def __init__(self, response: http.client.HTTPResponse, body: bytes):
        self.status = response.status
        self.headers = response.msg
        self.body = body

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        return f"<{self.status} {dict(self.headers)} {self.body[:300]!r}>"


class Setup:
    """One proxy in front of one ratewarden and the app; `allowed` is this
    test's ledger of the answers that came from the application."""

    def __init__(self, name, proxy: Proxy, app: App):
        self.name, self.proxy, self.app = name, proxy, app
        self.allowed = collections.Counter()

    def request(self, client, path, method="GET", headers=None, body=None) -> Answer:
        c = http.client.HTTPConnection("127.0.0.1", self.proxy.port, timeout=TIMEOUT,
                                       source_address=(client, 0))
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            answer = Answer(r, r.read())
        finally:
            c.close()
        if answer.body in (b"upstream ok", b"app forbids"):
            self.allowed[(method, path)] += 1
        return answer


def remaining(answer: Answer):
    value = answer.header("RateLimit") or ""
    m = re.search(r"\br=(\d+)", value)
    return int(m.group(1)) if m else None


def assert_allowed(s: Setup, a: Answer, what, left=None):
    assert a.status == 200 and a.body == b"upstream ok", \
        f"{s.name}: {what}: wanted the application's 200, got {a!r}"
    if left is not None:
        assert remaining(a) == left, \
            f"{s.name}: {what}: wanted RateLimit with r={left}, got {a.header('RateLimit')!r} in {a!r}"
        assert a.header("RateLimit-Policy"), f"{s.name}: {what}: no RateLimit-Policy in {a!r}"


def assert_refused(s: Setup, a: Answer, what):
    assert a.status == 429, f"{s.name}: {what}: wanted 429, got {a!r}"
    retry = a.header("Retry-After")
    assert retry is not None and retry.isdigit() and 1 <= int(retry) <= 3600, \
        f"{s.name}: {what}: Retry-After should be 1..3600 s, got {retry!r} in {a!r}"
    for name in ("RateLimit", "RateLimit-Policy"):
        assert a.header(name), f"{s.name}: {what}: no {name} on the 429: {a!r}"
    assert remaining(a) == 0, f"{s.name}: {what}: RateLimit of a 429 should say r=0: {a!r}"
    content_type = a.header("Content-Type") or ""
    assert content_type.startswith("application/problem+json"), \
        f"{s.name}: {what}: Content-Type {content_type!r} on the 429"
    try:
        problem = json.loads(a.body)
    except ValueError:
        raise AssertionError(f"{s.name}: {what}: the 429's body is not JSON: {a.body!r}")
    assert problem.get("status") == 429, f"{s.name}: {what}: problem status {problem!r}"
    assert problem.get("title"), f"{s.name}: {what}: problem without a title {problem!r}"


def use_up(s: Setup, client, path, headers=None, what=""):
    """The client's 3 allowed requests, with r=2, 1, 0, then its 429."""
    prefix = f"{what} " if what else ""
    for n in range(LIMIT):
        a = s.request(client, path, headers=headers)
        assert_allowed(s, a, f"{prefix}request {n + 1} from {client}", left=LIMIT - 1 - n)
    assert_refused(s, s.request(client, path, headers=headers),
                   f"{prefix}request {LIMIT + 1} from {client}")


# ---------------------------------------------------------------- cases


def allowed_up_to_the_limit_then_refused(s: Setup):
    use_up(s, "127.0.0.2", "/api/x")
    assert_refused(s, s.request("127.0.0.2", "/api/x"), "a 5th request from 127.0.0.2")
    seen = s.app.count("GET", "/api/x")
    assert seen == LIMIT, f"{s.name}: the application saw {seen} GET /api/x, wanted {LIMIT}"


def each_client_has_its_own_counter(s: Setup):
    use_up(s, "127.0.0.3", "/api/per-client")
    use_up(s, "127.0.0.5", "/api/per-client")


def a_spoofed_x_forwarded_for_is_not_the_key(s: Setup):
    spoof = {"X-Forwarded-For": "203.0.113.9"}
    use_up(s, "127.0.0.4", "/api/spoof", headers=spoof, what="spoofing 203.0.113.9:")
    # Had the spoofed value been the key, this client would share the
    # exhausted counter of 127.0.0.4.
    use_up(s, "127.0.0.6", "/api/spoof", headers=spoof, what="spoofing 203.0.113.9:")
    # An exhausted client (127.0.0.2, or made so here when this case runs
    # alone) ...
    for _ in range(LIMIT + 1):
        if s.request("127.0.0.2", "/api/spoof").status == 429:
            break
    else:
        raise AssertionError(f"{s.name}: 127.0.0.2 was never refused")
    # ... cannot be framed: a client claiming its address is keyed by its own.
    victim = {"X-Forwarded-For": "127.0.0.2"}
    assert_allowed(s, s.request("127.0.0.7", "/api/spoof", headers=victim),
                   "127.0.0.7 spoofing the exhausted 127.0.0.2", left=LIMIT - 1)
    # Nor by a longer chain that ends in the trusted proxy's own address.
    chain = {"X-Forwarded-For": "127.0.0.2, 127.0.0.1"}
    assert_allowed(s, s.request("127.0.0.8", "/api/spoof", headers=chain),
                   "127.0.0.8 spoofing '127.0.0.2, 127.0.0.1'", left=LIMIT - 1)


def a_client_cannot_pick_the_denial_status(s: Setup):
    use_up(s, "127.0.0.11", "/api/status", headers={"X-Ratewarden-Deny-Status": "401"},
           what="with X-Ratewarden-Deny-Status: 401:")
    assert_refused(s, s.request("127.0.0.11", "/api/status",
                                headers={"X-Ratewarden-Deny-Status": "403"}),
                   "an exhausted client sending X-Ratewarden-Deny-Status: 403")


def a_client_cannot_pick_the_uri_or_method_the_limit_sees(s: Setup):
    # The proxy sets X-Forwarded-Uri and X-Forwarded-Method itself: a
    # client's own ones (or an X-Original-URI) never reach the decision.
    use_up(s, "127.0.0.12", "/api/uri")
    spoofed = {"X-Forwarded-Uri": "/health", "X-Original-URI": "/health",
               "X-Forwarded-Method": "OPTIONS"}
    assert_refused(s, s.request("127.0.0.12", "/api/uri", headers=spoofed),
                   "an exhausted client sending its own X-Forwarded-Uri: /health")


def an_unmatched_path_always_passes(s: Setup):
    for n in range(2 * LIMIT):
        a = s.request("127.0.0.2", "/health")
        assert_allowed(s, a, f"GET /health {n + 1} from the exhausted-or-not 127.0.0.2")
        present = [h for h in RATE_LIMIT_HEADERS if a.header(h) is not None]
        assert not present, f"{s.name}: /health matched no policy but carries {present}: {a!r}"
    seen = s.app.count("GET", "/health")
    assert seen == 2 * LIMIT, f"{s.name}: the application saw {seen} GET /health, wanted {2 * LIMIT}"


def the_applications_own_403_is_not_a_denial(s: Setup):
    a = s.request("127.0.0.9", "/api/forbidden")
    assert a.status == 403 and a.body == b"app forbids", \
        f"{s.name}: the application's 403 should reach the client as is, got {a!r}"
    assert remaining(a) == LIMIT - 1, f"{s.name}: RateLimit on the app's 403: {a!r}"
    a = s.request("127.0.0.9", "/forbidden")
    assert a.status == 403 and a.body == b"app forbids", \
        f"{s.name}: the application's 403 on an unmatched path: {a!r}"


def a_request_body_reaches_the_application(s: Setup):
    body = b'{"order": 42}' * 100
    a = s.request("127.0.0.10", "/api/orders", method="POST", body=body,
                  headers={"Content-Type": "application/json"})
    assert_allowed(s, a, "POST /api/orders with a body", left=LIMIT - 1)
    with s.app.lock:
        got = [b for path, b in s.app.bodies if path == "/api/orders"]
    assert got == [body], f"{s.name}: the application got bodies {[len(b) for b in got]}, " \
                          f"wanted one of {len(body)} bytes"


def every_spelling_of_a_limited_path_shares_one_counter(s: Setup):
    client = "127.0.0.13"
    for n, path in enumerate(["/%61pi/spelled", "//api/spelled", "/x/../api/spelled"]):
        assert_allowed(s, s.request(client, path), f"{path} from {client}", left=LIMIT - 1 - n)
    for path in ["/api/spelled", "/api%2Fspelled", "/api;v=1/spelled", "/./api//spelled",
                 "/%61%70%69/spelled?x=1"]:
        assert_refused(s, s.request(client, path), f"{path} from {client} after its {LIMIT}")


# What a client may send after its 429s on /api/orders: "limited" is the
# 429 of its one counter; "refused" a path with no single meaning (servers
# read it differently), refused whoever sends it: ratewarden's 400 (a 500
# behind nginx, whose auth_request turns any answer but 2xx, 401 and 403
# into one) or nginx's own 400.
SPELLINGS = [
    ("/%61pi/orders", "limited"),
    ("//api/orders", "limited"),
    ("/x/../api/orders", "limited"),
    ("/API/../api/./orders", "limited"),
    ("/api%2Forders", "limited"),
    ("/api%2forders", "limited"),
    ("/%2Fapi/orders", "limited"),
    ("/api;jsessionid=1/orders", "limited"),
    ("/api/%2e%2e/api/orders", "refused"),
    ("/api/.%2E/api/orders", "refused"),
    ("/x/%2e%2e/api/orders", "refused"),
    ("/api%2F..%2Fapi/orders", "refused"),
    ("/api/..;/api/orders", "refused"),
    ("/api%5C..%5Corders", "refused"),
    ("/api\\..\\orders", "refused"),
    ("/api/orders%00", "refused"),
    ("/../api/orders", "refused"),
]


def assert_path_refused(s: Setup, a: Answer, what):
    assert a.status in (400, 500), f"{s.name}: {what}: wanted a refusal (400, or 500 from " \
                                   f"nginx's auth_request), got {a!r}"
    assert a.body not in (b"upstream ok", b"app forbids"), f"{s.name}: {what}: reached the app"
    if a.status == 400 and (a.header("Content-Type") or "").startswith("application/problem"):
        detail = json.loads(a.body).get("detail", "")
        assert "has no single meaning" in detail, f"{s.name}: {what}: {detail!r}"


def after_the_limit_no_spelling_reaches_the_application(s: Setup):
    client = "127.0.0.14"
    use_up(s, client, "/api/orders")
    for path, expected in SPELLINGS:
        a = s.request(client, path)
        what = f"{path} from {client} after its {LIMIT}"
        if expected == "limited":
            assert_refused(s, a, what)
        else:
            assert_path_refused(s, a, what)
    # The refused spellings are refused before any limit too.
    for path, expected in SPELLINGS:
        if expected == "refused":
            assert_path_refused(s, s.request("127.0.0.15", path), f"{path} from a new client")


def no_refused_request_reached_the_application(s: Setup):
    with s.app.lock:
        seen = dict(s.app.seen)
    assert seen == dict(s.allowed), \
        f"{s.name}: the application saw {seen}, the clients got {dict(s.allowed)} from it"


CASES = [
    allowed_up_to_the_limit_then_refused,
    each_client_has_its_own_counter,
    a_spoofed_x_forwarded_for_is_not_the_key,
    a_client_cannot_pick_the_denial_status,
    a_client_cannot_pick_the_uri_or_method_the_limit_sees,
    an_unmatched_path_always_passes,
    the_applications_own_403_is_not_a_denial,
    a_request_body_reaches_the_application,
    every_spelling_of_a_limited_path_shares_one_counter,
    after_the_limit_no_spelling_reaches_the_application,
    no_refused_request_reached_the_application,  # last: sums up the others
]


# Paths whose $uri nginx and ratewarden's normal form (fully decoded) must
# agree on; what nginx refuses (400), ratewarden must refuse too. No ';':
# ratewarden drops segment parameters, nginx keeps them.
NGINX_CORPUS = [
    "/", "/api/orders", "/%61pi/orders", "//api//orders", "/x/../api/orders",
    "/api/%2e%2e/api/x", "/a/.%2e/b", "/api%2Forders", "/api%2F..%2Fx", "/a%2F%2Fb",
    "/a//../b", "/a/..//b", "/a/b/..", "/a/b/.", "/a/.", "/a/..", "/..", "/../x",
    "/a/b/../../..", "/./a", "/.", "/.a", "/..a", "/a/...", "/a%2eb", "/%7e%7E", "/a%3Fb",
    "/a%25b", "/a%252e%252e", "/a%20b", "/a%c3%a9", "/caf%C3%A9/x", "/a%ffb", "/a%3Ab%40c",
    "/a%21%24%26%27%28%29%2A%2B%2C%3D", "/a%7Bb", "/a{b}", "/a%5Bb%5D", "/a[b]", "/a%22b",
    "/a%00b", "/a%zz", "/a%", "/a%4", "/a%0db", "/a%5Cb", "/a\\b", "/a//", "//", "///",
    "/a/b//c/./d/../e", "/a/b/%2e%2e/c", "/a|b^c", "/~user/x",
]

NEVER = """\
[[policies]]
name = "never"
algorithm = "fixed_window"
limit = 0
window = "1h"
key = ["literal:all"]
match = { path = "*" }
"""


def ratewarden_reads_paths_as_nginx_does(nginx_binary, binary, tmp: Path) -> None:
    """Each path of NGINX_CORPUS through an nginx answering its `$uri`, and
    to a ratewarden whose one policy (limit 0, on every path) denies every
    request, naming the path it matched in the problem's `instance`."""
    directory = tmp / "nginx-uri"
    directory.mkdir()
    directory.chmod(0o755)
    port = free_port()
    conf = directory / "nginx.conf"
    conf.write_text(f"""
worker_processes 1;
pid nginx.pid;
error_log error.log notice;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path client_body; proxy_temp_path proxy; fastcgi_temp_path fastcgi;
    uwsgi_temp_path uwsgi; scgi_temp_path scgi;
    server {{ listen 127.0.0.1:{port}; location / {{ return 200 "$uri"; }} }}
}}
""")
    nginx = Proxy("nginx-uri", [nginx_binary, "-p", f"{directory}/", "-e",
                                str(directory / "error.log"), "-c", str(conf), "-g", "daemon off;"],
                  port, directory)
    never = None
    try:
        never = Ratewarden(binary, tmp, policy=NEVER, name="ratewarden-never")
        disagreements = []
        for path in NGINX_CORPUS:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            try:
                c.request("GET", path)
                r = c.getresponse()
                uri = r.read() if r.status == 200 else None
            finally:
                c.close()
            c = http.client.HTTPConnection("127.0.0.1", never.port, timeout=TIMEOUT)
            try:
                c.request("GET", "/v1/authorize", headers={"X-Forwarded-Uri": path})
                r = c.getresponse()
                body = r.read()
            finally:
                c.close()
            if r.status == 429:
                ours = urllib.parse.unquote_to_bytes(json.loads(body)["instance"])
            else:
                assert r.status == 400, f"{path}: ratewarden answered {r.status} {body!r}"
                ours = None
            if ours is not None and ours != uri:
                disagreements.append(f"{path}: nginx {uri!r}, ratewarden {ours!r}")
        assert not disagreements, "\n".join(disagreements)
    finally:
        if never is not None:
            never.stop()
        nginx.stop()


def with_ratewarden_stopped(name, start, proxy_binary, tmp: Path, app: App,
                            ratewarden: Ratewarden, proxy: Proxy) -> None:
    """The configuration as shipped fails open when ratewarden cannot be
    reached; without its fail-open lines it fails closed."""
    closed = start(proxy_binary, tmp, app.port, ratewarden.port, fail_open=False)
    try:
        shipped, without = Setup(name, proxy, app), Setup(f"{name} without", closed, app)
        assert_allowed(without, without.request("127.0.0.20", "/api/up"),
                       "GET /api/up while ratewarden runs", left=LIMIT - 1)
        ratewarden.stop()
        for client, path in [("127.0.0.21", "/api/down"), ("127.0.0.21", "/api/down"),
                             ("127.0.0.22", "/health")]:
            a = shipped.request(client, path)
            assert_allowed(shipped, a, f"{path} with ratewarden stopped")
            present = [h for h in RATE_LIMIT_HEADERS if a.header(h) is not None]
            assert not present, f"{name}: unchecked, yet {present}: {a!r}"
        body = b'{"order": "while down"}'
        a = shipped.request("127.0.0.21", "/api/down-post", method="POST", body=body,
                            headers={"Content-Type": "application/json"})
        assert_allowed(shipped, a, "POST /api/down-post with ratewarden stopped")
        with app.lock:
            got = [b for p, b in app.bodies if p == "/api/down-post"]
        assert got == [body], f"{name}: the application got {got!r} with ratewarden stopped"
        wanted = 500 if name == "nginx" else 502
        for path in ["/api/closed", "/health-closed"]:
            a = without.request("127.0.0.23", path)
            assert a.status == wanted, f"{name} without the fail-open lines: {path}: " \
                                       f"wanted {wanted}, got {a!r}"
            assert app.count("GET", path) == 0, f"{name}: {path} reached the application"
    finally:
        closed.stop()


# What the documents write for the templates' placeholders, and for the
# upstream names a shorter nginx excerpt may spell out.
DOCUMENTED = {
    "nginx.conf.template": {"{{LISTEN}}": "80", "{{APP}}": "127.0.0.1:9000",
                            "{{RATEWARDEN}}": "127.0.0.1:8080",
                            "http://app;": "http://127.0.0.1:9000;",
                            "http://ratewarden/": "http://127.0.0.1:8080/"},
    "Caddyfile.template": {"http://127.0.0.1:{{PORT}}": "example.com",
                           "{{APP}}": "127.0.0.1:9000", "{{RATEWARDEN}}": "127.0.0.1:8080"},
}
MARKER = {"nginx.conf.template": "auth_request /_ratewarden;",
          "Caddyfile.template": "rewrite /v1/authorize"}


def config_lines(text: str, replacements=None) -> list:
    """The lines of a configuration as compared: placeholders and upstream
    names replaced, comments and blank lines dropped, spaces collapsed."""
    for old, new in (replacements or {}).items():
        text = text.replace(old, new)
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line)
        line = " ".join(line.split())
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def indented_blocks(markdown: str) -> list:
    """The indented code blocks of a Markdown text, dedented by 4."""
    blocks, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line[4:])
        else:
            if any(l.strip() for l in current):
                blocks.append("\n".join(current))
            current = []
    return blocks


def documented_configurations_are_the_tested_ones() -> None:
    """Every nginx and Caddy configuration quoted in the documents
    (README.md and docs/) is the template's lines, in order (excerpts may
    leave lines out, never add or change one), and docs/forward-auth.md
    quotes both."""
    problems = []
    root = HERE.parent
    docs = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    for doc in docs:
        blocks = indented_blocks(doc.read_text())
        for template, marker in MARKER.items():
            quoted = [b for b in blocks if marker in b]
            if not quoted and doc.name == "forward-auth.md":
                problems.append(f"{doc.name}: no {template} configuration found")
            expected = config_lines((TEMPLATES / template).read_text(), DOCUMENTED[template])
            for block in quoted:
                # An excerpt may name the upstreams by address.
                lines = config_lines(block, {k: v for k, v in DOCUMENTED[template].items()
                                             if not k.startswith("{{")})
                at = 0
                for line in lines:
                    try:
                        at = expected.index(line, at) + 1
                    except ValueError:
                        problems.append(f"{doc.relative_to(root)}: {template}: '{line}' is not in the "
                                        f"tested configuration (or not in its order)")
                        break
    assert not problems, "\n".join(problems)


def run_proxy(name, start, proxy_binary, binary, only) -> int:
    failures = 0
    app = ratewarden = proxy = None
    with tempfile.TemporaryDirectory(prefix=f"ratewarden-{name}-") as tmp:
        tmp = Path(tmp)
        try:
            try:
                app = App()
                ratewarden = Ratewarden(binary, tmp)
                proxy = start(proxy_binary, tmp, app.port, ratewarden.port)
            except Exception:  # noqa: BLE001 - reported as this proxy's failure
                print(f"FAIL {name}: setup", flush=True)
                traceback.print_exc()
                return 1
            setup = Setup(name, proxy, app)
            phases = list(CASES)
            if name == "nginx":
                phases.append(ratewarden_reads_paths_as_nginx_does)
            phases.append(with_ratewarden_stopped)  # last: stops ratewarden
            for case in phases:
                if only and only not in case.__name__:
                    continue
                # Every case counts in POLICY's fixed window, whose count
                # starts over at the hour: none may straddle it.
                avoid_window_edge(WINDOW_SECS, CASE_SECS)
                started = time.time()
                try:
                    if case is ratewarden_reads_paths_as_nginx_does:
                        case(proxy_binary, binary, tmp)
                    elif case is with_ratewarden_stopped:
                        case(name, start, proxy_binary, tmp, app, ratewarden, proxy)
                    else:
                        case(setup)
                    print(f"ok   {name}: {case.__name__} ({time.time() - started:.1f} s)", flush=True)
                except Exception:  # noqa: BLE001 - every failure is reported
                    failures += 1
                    print(f"FAIL {name}: {case.__name__}", flush=True)
                    traceback.print_exc()
                    print(f"--- {name} log:\n{tail(proxy.log_path)}\n--- ratewarden log:\n"
                          f"{tail(ratewarden.log_path)}", flush=True)
        finally:
            for part in (proxy, ratewarden, app):
                if part is None:
                    continue
                try:
                    part.stop()
                except Exception:  # noqa: BLE001 - a process that would not stop fails
                    failures += 1
                    print(f"FAIL {name}: stopping {type(part).__name__}", flush=True)
                    traceback.print_exc()
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the ratewarden binary")
    parser.add_argument("--nginx", required=True, help="the nginx binary")
    parser.add_argument("--caddy", required=True, help="the caddy binary")
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    failures = 0
    if not args.only or args.only in "documented_configurations_are_the_tested_ones":
        try:
            documented_configurations_are_the_tested_ones()
            print("ok   documented_configurations_are_the_tested_ones", flush=True)
        except AssertionError:
            failures += 1
            print("FAIL documented_configurations_are_the_tested_ones", flush=True)
            traceback.print_exc()
    failures += run_proxy("nginx", start_nginx, args.nginx, args.bin, args.only)
    failures += run_proxy("caddy", start_caddy, args.caddy, args.bin, args.only)
    print(f"{failures} failed" if failures else "all proxies cases passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
