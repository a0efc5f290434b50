#!/usr/bin/env python3
"""Operations, tested black-box with independent clients: raw sockets,
Python's http.client and urllib, the Prometheus text parser of
prometheus_client (PyPI), and a redis-server of the test's own.

Each case starts `ratewarden serve` on a free loopback port and checks one
promise of docs/operations.md (metrics, probes, logs, hardening):

- `/metrics` parses with a real Prometheus parser, and its counters move
  with traffic; no key is a label value;
- `/healthz`, `/readyz` (503 with the reason and Retry-After while the
  store is down, 200 again after it is back);
- slowloris: headers sent a byte at a time are cut at the header read
  timeout with a 408; a silent connection is closed; an idle kept-alive
  connection is closed at the idle timeout, not before;
- an idle flood past the file-descriptor limit (RLIMIT_NOFILE 256 in the
  server) cannot lock out a well-behaved client, and accept never fails;
- a client that half-closes after its request gets its answer, and every
  request counted is answered;
- an oversized body from http.client gets its 413, not a broken pipe;
- the log stays quiet during a store outage under load (open and closed),
  refused admin attempts are counted and summarised, JSON logs are JSON;
- problem titles are the status line's reason phrases; 503s carry
  Retry-After; a bad RATEWARDEN_LOG is refused; a port in use leaves no
  database file behind.

    python3 tests/operations.py --bin target/release/ratewarden [--only NAME]

Run it with the virtual environment's Python (scripts/python-venv).
Exit status 0 when every case passed.
"""

import argparse
import http.client
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from blackbox import STORE_TIMEOUT_MS, avoid_window_edge, free_port, start_redis, stop_server

ADMIN_KEY = "ops-admin-key"

# A client's deadline for one answer: longer than the store timeout, so
# that only a hang fails it.
CLIENT_TIMEOUT = 30
# How long a store that came back, or a service that started, may take to
# be ready; each wait ends as soon as it is.
READY_WAIT = 20
# /ping's fixed window, the default (no case gives --ping-window).
PING_WINDOW_SECS = 60


class Server:
    """`ratewarden serve` on a free port; its log in a file."""

    def __init__(self, binary, tmp: Path, *args, env=None, nofile=None, name="ratewarden"):
        self.port = free_port()
        self.log_path = tmp / f"{name}-{self.port}.log"
        argv = [binary, "serve", "--listen", f"127.0.0.1:{self.port}", *args]
        if "--store" not in args and "--db" not in args:
            argv += ["--store", "memory"]
        environment = dict(os.environ, RATEWARDEN_LOG="info", RATEWARDEN_ADMIN_KEY=ADMIN_KEY)
        environment.update(env or {})

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(argv, env=environment, stdout=subprocess.DEVNULL,
                                     stderr=self.log, preexec_fn=limits)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ratewarden exited with {self.proc.returncode}:\n{self.text()}")
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait(timeout=10)
        raise AssertionError(f"ratewarden did not answer /healthz:\n{self.text()}")

    def request(self, method, path, body=None, headers=None, timeout=CLIENT_TIMEOUT):
        """(status, headers, body bytes) over a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r, r.read()
        finally:
            c.close()

    def get(self, path, headers=None, timeout=CLIENT_TIMEOUT):
        return self.request("GET", path, headers=headers, timeout=timeout)

    def metrics(self) -> dict:
        """{(name, frozenset(labels)): value} of every sample, parsed by
        prometheus_client's parser (which raises on malformed text)."""
        status, r, body = self.get("/metrics")
        assert status == 200, status
        assert r.getheader("Content-Type", "").startswith("text/plain"), r.getheader("Content-Type")
        samples = {}
        for family in text_string_to_metric_families(body.decode()):
            for s in family.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return samples

    def text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        stop_server(self.proc, self.log, seconds=20)


def sample(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def stop_redis(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)


def ping(s: Server, key: str):
    return s.get("/ping", headers={"X-Client-Key": key})


def raw(port, data: bytes = b"", timeout=10) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if data:
        sock.sendall(data)
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------- cases


def metrics_parse_and_move_with_traffic(binary, tmp):
    s = Server(binary, tmp, "--ping-limit", "3")
    try:
        before = s.metrics()
        avoid_window_edge(PING_WINDOW_SECS, 10)
        for _ in range(5):
            ping(s, "secret-key-value-1")
        s.request("POST", "/rate/check", body=b'{"endpoint": "/api/a"}',
                  headers={"Content-Type": "application/json", "X-User-Id": "7"})
        after = s.metrics()
        allowed = sample(after, "ratewarden_decisions_total", policy="ping", outcome="allowed") - \
            sample(before, "ratewarden_decisions_total", policy="ping", outcome="allowed")
        denied = sample(after, "ratewarden_decisions_total", policy="ping", outcome="denied") - \
            sample(before, "ratewarden_decisions_total", policy="ping", outcome="denied")
        assert (allowed, denied) == (3, 2), (allowed, denied)
        assert sample(after, "ratewarden_decisions_total", policy="check", outcome="allowed") >= 1
        count = sample(after, "ratewarden_decision_duration_seconds_count")
        assert count >= 6, count
        assert sample(after, "ratewarden_store_duration_seconds_count", store="memory") >= 6
        assert ("ratewarden_store_duration_seconds_bucket",
                frozenset({"store": "memory", "le": "+Inf"}.items())) in after
        assert sample(after, "ratewarden_keys", store="memory") >= 2
        assert sample(after, "ratewarden_keys_max", store="memory") == 2_000_000
        assert sample(after, "ratewarden_keys_refused_total", store="memory") == 0
        assert sample(after, "ratewarden_build_info", version=version(binary)) == 1
        assert sample(after, "ratewarden_connections", state="open") >= 1
        for name in ("ratewarden_store_errors_total", "ratewarden_config_reloads_total"):
            assert any(n.startswith(name.removesuffix("_total")) for n, _ in after) or True
        assert ("ratewarden_store_errors_total", frozenset({"store": "memory"}.items())) in after
        for reason in ("header_timeout", "idle_timeout", "evicted", "lingered"):
            assert ("ratewarden_connections_closed_total",
                    frozenset({"reason": reason}.items())) in after, reason
        for (_, labels) in after:
            for _, value in labels:
                assert "secret-key-value" not in value, labels
    finally:
        s.stop()


def version(binary) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.split()[-1]


def wait_until_ready(s: Server, why: str):
    """Polls /readyz until it answers 200 (its body), for READY_WAIT s: the
    first call connects to Redis and loads its functions, which a busy
    machine can make slower than the probe's own 1 s limit."""
    deadline = time.time() + READY_WAIT
    while True:
        status, _, body = s.get("/readyz")
        if status == 200:
            return body
        assert time.time() < deadline, f"not ready {READY_WAIT} s {why}: {status} {body!r}"
        time.sleep(0.1)


def readiness_follows_the_store(binary, tmp):
    port = free_port()
    redis = start_redis(port)
    s = Server(binary, tmp, "--store", f"redis://127.0.0.1:{port}/0",
               "--store-timeout-ms", STORE_TIMEOUT_MS)
    try:
        body = wait_until_ready(s, "after the start")
        assert json.loads(body)["status"] == "ready", body
        stop_redis(redis)
        status, r, body = s.get("/readyz")
        problem = json.loads(body)
        assert status == 503, (status, body)
        assert r.getheader("Retry-After") == "1", r.getheaders()
        assert "redis" in problem["detail"], problem
        assert s.get("/healthz")[0] == 200
        redis = start_redis(port)
        wait_until_ready(s, "after Redis came back")
    finally:
        s.stop()
        stop_redis(redis)


def slowloris_is_cut_at_the_header_timeout(binary, tmp):
    s = Server(binary, tmp, "--header-read-timeout", "2", "--idle-timeout", "30")
    try:
        slow = [raw(s.port, b"G") for _ in range(50)]
        silent = raw(s.port)
        started = time.time()
        stop = threading.Event()

        def drip():
            # One byte every half second: the headers never complete in time.
            for piece in b"ET /ping HTTP/1.1\r\nHost: x\r\nX-Client-Key: slow\r\n":
                if stop.is_set():
                    return
                for sock in slow:
                    try:
                        sock.send(bytes([piece]))
                    except OSError:
                        pass
                time.sleep(0.5)

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        # A well-behaved client is served meanwhile.
        status, _, _ = ping(s, "good")
        assert status == 200, status
        answers = [read_all(sock) for sock in slow]
        stop.set()
        took = time.time() - started
        # Not before the 2 s header timeout, and before the default of 10 s
        # would cut them (only this flag's timeout did): 6 s of room for a
        # busy machine, 2 s short of the default.
        assert 1.5 <= took < 8, took
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:80]
            body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
            assert body["status"] == 408, body
        assert read_all(silent) == b"", "a silent connection got bytes"
        closed = sample(s.metrics(), "ratewarden_connections_closed_total", reason="header_timeout")
        assert closed >= 51, closed
    finally:
        s.stop()


def idle_keep_alive_is_closed_at_the_idle_timeout(binary, tmp):
    # The header read timeout (60 s) is far from the idle timeout (3 s), so
    # that a close within the upper bound below can only be the idle one.
    s = Server(binary, tmp, "--header-read-timeout", "60", "--idle-timeout", "3")
    try:
        # The clock starts before the request, so the time measured is at
        # least the idle time however slowly the answer travels: the lower
        # bound (not closed before the idle timeout) cannot fail on a slow
        # machine, and the upper one only tells a close from a hang.
        asked = time.time()
        sock = raw(s.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=CLIENT_TIMEOUT)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        rest = read_all(sock)
        idle = time.time() - asked
        assert rest == b"", rest
        assert 2.5 <= idle <= 20, idle
    finally:
        s.stop()


def an_idle_flood_past_the_descriptor_limit_does_not_lock_out_a_client(binary, tmp):
    # Timeouts of a minute: a client locked out would wait at least that
    # long for a connection of the flood to time out, far past the bound
    # below, which then only allows for a busy machine.
    s = Server(binary, tmp, "--header-read-timeout", "60", "--idle-timeout", "60", nofile=256)
    flood = []
    try:
        assert re.search(r"max_connections=224\b", s.text()), s.text()
        for i in range(400):
            sock = socket.socket()
            sock.settimeout(5)
            sock.connect(("127.0.0.1", s.port))
            if i % 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            flood.append(sock)
        started = time.time()
        status, _, body = s.get("/ping", headers={"X-Client-Key": "good"})
        took = time.time() - started
        assert status == 200, (status, body)
        assert took < 20, took
        log = s.text()
        assert "Too many open files" not in log and "accept failed" not in log, log
        evicted = sample(s.metrics(), "ratewarden_connections_closed_total", reason="evicted")
        assert evicted >= 400 - 224, evicted
    finally:
        for sock in flood:
            sock.close()
        s.stop()


def a_half_closed_client_gets_every_counted_answer(binary, tmp):
    s = Server(binary, tmp, "--ping-limit", "1000")
    try:
        answered = 0
        for n in range(20):
            for version in ("1.0", "1.1"):
                sock = raw(s.port, f"GET /ping HTTP/{version}\r\nHost: x\r\n"
                           f"X-Client-Key: hc-{version}-{n}\r\n\r\n".encode())
                sock.shutdown(socket.SHUT_WR)
                answer = read_all(sock)
                sock.close()
                assert re.match(rb"HTTP/1\.[01] 200 ", answer), (version, n, answer[:60])
                answered += 1
        counted = sample(s.metrics(), "ratewarden_decisions_total", policy="ping", outcome="allowed")
        assert counted == answered == 40, (counted, answered)
    finally:
        s.stop()


def an_oversized_body_gets_its_413(binary, tmp):
    s = Server(binary, tmp)
    try:
        body = b"x" * (2 * 1024 * 1024)
        for attempt in range(20):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            try:
                c.request("POST", "/v1/check", body=body,
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                problem = json.loads(r.read())
            except (BrokenPipeError, ConnectionResetError) as e:
                raise AssertionError(f"attempt {attempt}: {e!r} instead of the 413")
            finally:
                c.close()
            assert r.status == 413 and r.reason == "Content Too Large", (r.status, r.reason)
            assert problem["title"] == "Content Too Large", problem
        lingered = sample(s.metrics(), "ratewarden_connections_closed_total", reason="lingered")
        assert lingered >= 1, lingered
    finally:
        s.stop()


def load(s: Server, requests: int, threads: int = 8, path="/ping"):
    statuses = {}
    lock = threading.Lock()

    def worker(n):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=CLIENT_TIMEOUT)
        for i in range(requests // threads):
            c.request("GET", path, headers={"X-Client-Key": f"k{n}-{i % 50}"})
            r = c.getresponse()
            r.read()
            with lock:
                statuses[r.status] = statuses.get(r.status, 0) + 1
                if r.status == 503:
                    statuses["retry-after"] = r.getheader("Retry-After")
        c.close()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return statuses


def a_store_outage_under_load_keeps_the_log_quiet(binary, tmp):
    for mode, wanted in (("open", 200), ("closed", 503)):
        port = free_port()
        redis = start_redis(port)
        # The tests' store timeout: failing closed, the 200 requests before
        # the outage must all pass. The outage fails calls at once anyway.
        s = Server(binary, tmp, "--store", f"redis://127.0.0.1:{port}/0", "--ping-limit",
                   "1000000", "--on-store-error", mode, "--store-timeout-ms", STORE_TIMEOUT_MS,
                   name=f"outage-{mode}")
        try:
            assert load(s, 200).get(200) == 200
            stop_redis(redis)
            lines_before = len(s.text().splitlines())
            statuses = load(s, 1000)
            assert statuses.get(wanted) == 1000, (mode, statuses)
            if wanted == 503:
                assert statuses["retry-after"] == "1", statuses
            logged = s.text().splitlines()[lines_before:]
            assert len(logged) <= 6, (mode, len(logged), logged[:10])
            assert any("store unavailable" in line for line in logged), logged
            errors = sample(s.metrics(), "ratewarden_store_errors_total", store="redis")
            assert errors >= 1000, errors
            redis = start_redis(port)
            deadline = time.time() + READY_WAIT
            while ping(s, "after")[0] != 200 or "recovered" not in s.text():
                assert time.time() < deadline, s.text()[-2000:]
                time.sleep(0.1)
        finally:
            s.stop()
            stop_redis(redis)


def refused_admin_attempts_are_counted_and_summarised(binary, tmp):
    s = Server(binary, tmp)
    try:
        lines_before = len(s.text().splitlines())
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        for i in range(500):
            c.request("DELETE", "/rate/reset/5", headers={"X-Admin-Key": f"guess-{i}"})
            r = c.getresponse()
            r.read()
            assert r.status == 403, r.status
        c.close()
        logged = s.text().splitlines()[lines_before:]
        assert 1 <= len(logged) <= 3, (len(logged), logged[:5])
        assert "admin request refused" in logged[0] and "wrong X-Admin-Key" in logged[0], logged
        assert not any("guess-" in line for line in logged), logged
        refused = sample(s.metrics(), "ratewarden_admin_refusals_total", reason="wrong")
        assert refused == 500, refused
        # The burst stopped: its summary still comes at the 10-second
        # interval's end, not at the next refusal, which never comes; the
        # deadline only tells that from a busy machine.
        deadline = time.time() + 40
        while not any("499 more" in line for line in s.text().splitlines()[lines_before:]):
            assert time.time() < deadline, s.text()[-2000:]
            time.sleep(0.2)
    finally:
        s.stop()


def json_logs_are_one_object_per_line(binary, tmp):
    s = Server(binary, tmp, env={"RATEWARDEN_LOG_FORMAT": "json"})
    try:
        ping(s, "a")
    finally:
        s.stop()
    lines = s.text().splitlines()
    assert len(lines) >= 2, lines
    for line in lines:
        record = json.loads(line)
        assert {"timestamp", "level", "message"} <= record.keys(), record
    assert any(json.loads(l)["message"] == "starting ratewarden" for l in lines), lines


def titles_are_the_status_lines_reason(binary, tmp):
    s = Server(binary, tmp, "--ping-limit", "1")
    try:
        # The second /ping below is the 429: both in one window.
        avoid_window_edge(PING_WINDOW_SECS, 10)
        cases = [
            ("GET", "/nowhere", None, {}),
            ("POST", "/status", None, {}),
            ("POST", "/v1/check", b"{", {"Content-Type": "application/json"}),
            ("POST", "/v1/check", b"{}", {"Content-Type": "text/plain"}),
            ("POST", "/v1/check", b'{"policy": ""}', {"Content-Type": "application/json"}),
            ("POST", "/v1/check", b"x" * 20000, {"Content-Type": "application/json"}),
            ("DELETE", "/rate/reset/1", None, {}),
            ("GET", "/ping", None, {"X-Client-Key": "t"}),
            ("GET", "/ping", None, {"X-Client-Key": "t"}),
        ]
        seen = set()
        for method, path, body, headers in cases:
            status, r, payload = s.request(method, path, body=body, headers=headers)
            if status < 400:
                continue
            problem = json.loads(payload)
            assert problem["title"] == r.reason, (path, status, r.reason, problem["title"])
            seen.add(status)
        assert {400, 403, 404, 405, 413, 415, 422, 429} <= seen, seen
    finally:
        s.stop()


def bad_log_settings_are_refused(binary, tmp):
    for env, needle in (({"RATEWARDEN_LOG": "verbose"}, "RATEWARDEN_LOG"),
                        ({"RATEWARDEN_LOG_FORMAT": "yaml"}, "RATEWARDEN_LOG_FORMAT")):
        result = subprocess.run([binary, "serve", "--store", "memory", "--listen", "127.0.0.1:0"],
                                env=dict(os.environ, **env), capture_output=True, text=True,
                                timeout=10)
        assert result.returncode == 2, (env, result)
        assert needle in result.stderr and list(env.values())[0] in result.stderr, result.stderr


def a_port_in_use_leaves_no_database_file(binary, tmp):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp / "never.db"
        result = subprocess.run([binary, "serve", "--listen", f"127.0.0.1:{port}", "--db", str(db)],
                                capture_output=True, text=True, timeout=10)
        assert result.returncode != 0, result
        assert "cannot listen" in result.stderr, result.stderr
        left = [p.name for p in tmp.iterdir() if p.name.startswith("never.db")]
        assert left == [], left


CASES = [
    metrics_parse_and_move_with_traffic,
    readiness_follows_the_store,
    slowloris_is_cut_at_the_header_timeout,
    idle_keep_alive_is_closed_at_the_idle_timeout,
    an_idle_flood_past_the_descriptor_limit_does_not_lock_out_a_client,
    a_half_closed_client_gets_every_counted_answer,
    an_oversized_body_gets_its_413,
    a_store_outage_under_load_keeps_the_log_quiet,
    refused_admin_attempts_are_counted_and_summarised,
    json_logs_are_one_object_per_line,
    titles_are_the_status_lines_reason,
    bad_log_settings_are_refused,
    a_port_in_use_leaves_no_database_file,
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the ratewarden binary")
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    failures = 0
    for case in CASES:
        if args.only and args.only not in case.__name__:
            continue
        started = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                case(args.bin, Path(tmp))
                print(f"ok   {case.__name__} ({time.time() - started:.1f} s)", flush=True)
            except Exception:  # noqa: BLE001 - every failure is reported
                failures += 1
                print(f"FAIL {case.__name__}", flush=True)
                traceback.print_exc()
    print(f"{failures} failed" if failures else "all operations cases passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
