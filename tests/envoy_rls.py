#!/usr/bin/env python3
"""Envoy's rate limit service, tested with independent clients: Python
grpcio with the Envoy protos of xds-protos (PyPI), and urllib for POST
/json.

For each store (memory, SQLite, a redis-server of its own), starts
`ratewarden serve --grpc-listen ... --envoy-config DIR` on free loopback
ports, with the reference server's own rule files (tests/envoy/reference:
its integration-test configs, and its example minus the two keys
ratewarden refuses), and runs the reference server's integration cases
(envoyproxy/ratelimit test/integration and integration-test/scripts):
an unknown domain, limits counting down, two descriptors, wildcards with
share_threshold, replaces, shadow mode, unlimited, detailed_metric, a
reload that adds a domain and keeps counters; plus gRPC health (and, on
Redis, NOT_SERVING while Redis is down), INVALID_ARGUMENT and /json.
With Redis among the stores, also starts `ratewarden serve` with nothing
but an envoyproxy/ratelimit deployment's environment (RUNTIME_ROOT,
REDIS_URL, REDIS_AUTH, PORT, GRPC_PORT, ...) and decides through it.

    python3 tests/envoy_rls.py --bin target/release/ratewarden \
        [--stores memory,sqlite,redis]

Run it with the virtual environment's Python (scripts/python-venv).
Exit status 0 when every case passed on every store.
"""

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from google.protobuf import wrappers_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from blackbox import STORE_TIMEOUT_MS, avoid_window_edge, free_port, start_redis, stop_server

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "envoy" / "reference"

OK = rls_pb2.RateLimitResponse.OK
OVER_LIMIT = rls_pb2.RateLimitResponse.OVER_LIMIT
Unit = rls_pb2.RateLimitResponse.RateLimit

# The deadlines of this file, in seconds. Each wait ends as soon as what it
# waits for happens (the watcher applies a change within a fraction of a
# second, the service starts in well under one): they are long so that a
# loaded 2-core CI machine fails none of them.
RELOAD_WAIT = 20   # a changed rules file applied, or its error logged
HEALTH_WAIT = 30   # gRPC health reaching a status
# One call's deadline: longer than the store timeout, so that only a hang
# fails it.
CALL_TIMEOUT = 30

# Ours, beside the reference files: the extension keys.
EXTENSIONS = """
domain: extensions
descriptors:
  - key: api_key
    rate_limit: {requests_per_unit: 3, window: 1h, algorithm: sliding_window}
  - key: burst
    rate_limit: {requests_per_unit: 60, window: 1h, algorithm: gcra, burst: 2}
"""


def example_without_unimplemented() -> str:
    """The reference example without quota_mode and metadata blocks."""
    out, skip = [], None
    for line in (REFERENCE / "examples" / "example.yaml").read_text().splitlines():
        indent = len(line) - len(line.lstrip())
        if skip is not None:
            if line.strip() and indent > skip:
                continue
            skip = None
        stripped = line.strip()
        if stripped.startswith("quota_mode:"):
            continue
        if stripped.startswith("metadata:"):
            skip = indent
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def descriptor(*entries, hits=None, limit=None):
    d = ratelimit_pb2.RateLimitDescriptor(
        entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries])
    if hits is not None:
        d.hits_addend.CopyFrom(wrappers_pb2.UInt64Value(value=hits))
    if limit is not None:
        d.limit.CopyFrom(ratelimit_pb2.RateLimitDescriptor.RateLimitOverride(
            requests_per_unit=limit[0], unit=limit[1]))
    return d


class Server:
    """`ratewarden serve` on free ports with the rules in `rules`."""

    def __init__(self, binary: str, store: str, rules: Path, tmp: Path):
        self.http_port, self.grpc_port = free_port(), free_port()
        args = [binary, "serve", "--listen", f"127.0.0.1:{self.http_port}",
                "--grpc-listen", f"127.0.0.1:{self.grpc_port}", "--envoy-config", str(rules)]
        if store == "sqlite":
            args += ["--db", str(tmp / "ratewarden.db")]
        else:
            args += ["--store", store]
        if store.startswith("redis://"):
            args += ["--store-timeout-ms", STORE_TIMEOUT_MS]
        env = dict(os.environ, RATEWARDEN_LOG="info")
        self.start(args, env, tmp / f"ratewarden-{store.split(':')[0]}.log")

    def start(self, args, env, log_path: Path, cwd=None) -> None:
        """Runs `args` with `env`, its standard error in `log_path`, and
        waits for gRPC health to say SERVING."""
        self.log_path = log_path
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.rls = rls_pb2_grpc.RateLimitServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.wait_for_health(health_pb2.HealthCheckResponse.SERVING)

    def wait_for_health(self, wanted, seconds: float = HEALTH_WAIT) -> None:
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ratewarden exited with {self.proc.returncode}:\n{self.text()}")
            try:
                last = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1).status
                if last == wanted:
                    return
            except grpc.RpcError as e:
                last = e.code()
            time.sleep(0.05)
        raise AssertionError(f"health stayed {last}, wanted {wanted}:\n{self.text()}")

    def ask(self, domain, *descriptors, hits=0):
        return self.rls.ShouldRateLimit(
            rls_pb2.RateLimitRequest(domain=domain, descriptors=list(descriptors), hits_addend=hits),
            timeout=CALL_TIMEOUT)

    def json(self, body: bytes):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}/json", data=body,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as r:
                return r.status, r.headers.get("Content-Type"), json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), json.loads(e.read())

    def text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def wait_for_log(self, needle: str, seconds: float = RELOAD_WAIT) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline:
            if needle in self.text():
                return
            time.sleep(0.05)
        raise AssertionError(f"no '{needle}' in the log within {seconds} s:\n{self.text()}")

    def stop(self) -> None:
        self.channel.close()
        stop_server(self.proc, self.log)
        if self.proc.returncode not in (0, -15):
            raise AssertionError(f"ratewarden exited with {self.proc.returncode}:\n{self.text()}")


def expect(status, code, rpu=None, unit=None, remaining=None):
    assert status.code == code, f"code {status.code}, expected {code}: {status}"
    if rpu is None:
        assert not status.HasField("current_limit"), status
    else:
        assert status.current_limit.requests_per_unit == rpu, status
        assert status.current_limit.unit == unit, status
        assert status.HasField("duration_until_reset"), status
    if remaining is not None:
        assert status.limit_remaining == remaining, f"remaining {status.limit_remaining}, expected {remaining}"


# --- the reference's test/integration cases --------------------------------

def unknown_domain_is_ok_without_a_limit(s: Server, _):
    r = s.ask("foo", descriptor(("hello", "world")), hits=1)
    assert r.overall_code == OK
    assert len(r.statuses) == 1
    expect(r.statuses[0], OK, remaining=0)
    assert not r.response_headers_to_add


def expect_reset_between(status, window_secs: int, asked: float, answered: float) -> None:
    """`status.duration_until_reset` is the rest of its window, in whole
    seconds, at some instant between `asked` and `answered` (the client's
    clock read before the request and after its answer), give or take a
    second of rounding: however long the call took, as long as it stayed
    in one window."""
    def left(at: float) -> int:
        return window_secs - int(at) % window_secs
    got = status.duration_until_reset.seconds
    assert left(answered) - 1 <= got <= left(asked) + 1, (got, left(asked), left(answered), status)


def a_per_second_limit_counts_the_first_request(s: Server, _):
    avoid_window_edge(1, 0.3)
    r = s.ask("basic", descriptor(("key1", "foo")), hits=1)
    assert r.overall_code == OK
    expect(r.statuses[0], OK, 50, Unit.SECOND, 49)


def a_minute_limit_counts_down_then_refuses(s: Server, _):
    avoid_window_edge(60, 5)
    value = str(random.getrandbits(62))
    for i in range(25):
        asked = time.time()
        r = s.ask("another", descriptor(("key2", value)), hits=1)
        answered = time.time()
        if i < 20:
            assert r.overall_code == OK, i
            expect(r.statuses[0], OK, 20, Unit.MINUTE, 20 - (i + 1))
        else:
            assert r.overall_code == OVER_LIMIT, i
            expect(r.statuses[0], OVER_LIMIT, 20, Unit.MINUTE, 0)
        expect_reset_between(r.statuses[0], 60, asked, answered)


def two_keys_of_one_domain_are_all_or_nothing(s: Server, _):
    avoid_window_edge(60, 5)
    value = str(random.getrandbits(62))
    for i in range(15):
        r = s.ask("another", descriptor(("key2", value)), descriptor(("key3", value)), hits=1)
        if i < 10:
            assert r.overall_code == OK, i
            expect(r.statuses[0], OK, 20, Unit.MINUTE, 20 - (i + 1))
            expect(r.statuses[1], OK, 10, Unit.HOUR, 10 - (i + 1))
        else:
            assert r.overall_code == OVER_LIMIT, i
            # Not charged when key3 refuses (the reference with
            # stopCacheKeyIncrementWhenOverlimit: 10 left).
            expect(r.statuses[0], OK, 20, Unit.MINUTE, 10)
            expect(r.statuses[1], OVER_LIMIT, 10, Unit.HOUR, 0)


def duration_until_reset_counts_down(s: Server, _):
    avoid_window_edge(86400, 5)
    asked = time.time()
    first = s.ask("another", descriptor(("key4", "durTest")), hits=1).statuses[0]
    expect_reset_between(first, 86400, asked, time.time())


def share_threshold_shares_one_counter(s: Server, _):
    avoid_window_edge(3600, 5)
    domain = "share-threshold-test"
    for i in range(10):
        name = "files/a.pdf" if i % 2 else "files/b.csv"
        r = s.ask(domain, descriptor(("files", name)), hits=1)
        assert r.overall_code == OK, i
    r = s.ask(domain, descriptor(("files", "files/c.txt")), hits=1)
    assert r.overall_code == OVER_LIMIT
    expect(r.statuses[0], OVER_LIMIT, 10, Unit.HOUR, 0)
    for i in range(3):
        r = s.ask(domain, descriptor(("files_no_share", f"files_no_share/{random.getrandbits(40)}")), hits=1)
        expect(r.statuses[0], OK, 10, Unit.HOUR, 9)


# --- the reference's integration-test/scripts, on its example --------------

def replaces_lifts_a_banned_limit(s: Server, _):
    avoid_window_edge(60, 5)
    banned = descriptor(("foo", "bkthomps"), ("bar", "banned"))
    assert s.ask("rl", banned, hits=1).overall_code == OVER_LIMIT
    mock = descriptor(("source_cluster", "proxy"), ("destination_cluster", "mock"))
    assert s.ask("rl", banned, mock, hits=1).overall_code == OVER_LIMIT
    override = descriptor(("source_cluster", "proxy"), ("destination_cluster", "override"))
    codes = [s.ask("rl", banned, override, hits=1).overall_code for _ in range(3)]
    assert codes == [OK, OK, OVER_LIMIT], codes
    # Replacing leaves the original limit alone.
    mine = descriptor(("foo", "my_foo"), ("bar", "bkthomps"))
    to_bkthomps = descriptor(("source_cluster", "proxy"), ("destination_cluster", "bkthomps"))
    codes = [s.ask("rl", mine, to_bkthomps, hits=1).overall_code for _ in range(3)]
    assert codes == [OK, OK, OVER_LIMIT], codes
    elsewhere = descriptor(("source_cluster", "proxy"), ("destination_cluster", "not_bkthomps"))
    codes = [s.ask("rl", mine, elsewhere, hits=1).overall_code for _ in range(2)]
    assert codes == [OK, OVER_LIMIT], codes
    # One limit replaces two.
    fake = descriptor(("source_cluster", "proxy"), ("destination_cluster", "fake"))
    account = descriptor(("category", "account"))
    codes = [s.ask("rl", mine, fake, account, hits=1).overall_code for _ in range(5)]
    assert codes == [OK, OK, OK, OK, OVER_LIMIT], codes


def a_wildcard_child_triggers_its_limit(s: Server, _):
    avoid_window_edge(60, 5)
    d = descriptor(("foo", "pelle"), ("baz", "not-so-shady"))
    codes = [s.ask("rl", d, hits=1).overall_code for _ in range(4)]
    assert codes == [OK, OK, OK, OVER_LIMIT], codes


def shadow_mode_never_refuses(s: Server, _):
    # Nothing is refused, but remaining 0 at the end needs 3 of the 5 in
    # one window of its per-minute limit.
    avoid_window_edge(60, 5)
    d = descriptor(("foo", "pelle"), ("baz", "shady"))
    for i in range(5):
        r = s.ask("rl", d, hits=1)
        assert r.overall_code == OK, i
        assert r.statuses[0].code == OK, i
    assert r.statuses[0].limit_remaining == 0


def detailed_metric_limits_per_value(s: Server, _):
    avoid_window_edge(60, 5)
    d = descriptor(("unspec", "unspecified_value"))
    codes = [s.ask("rl", d, hits=1).overall_code for _ in range(3)]
    assert codes == [OK, OK, OVER_LIMIT], codes


def unlimited_reports_the_largest_remaining(s: Server, _):
    for d in (descriptor(("qux", "anything")), descriptor(("foo", "x"), ("bay", "y"))):
        r = s.ask("rl", d, hits=1)
        assert r.overall_code == OK
        expect(r.statuses[0], OK, remaining=4294967295)


# --- ratewarden's own ------------------------------------------------------

def extension_keys_choose_the_algorithm(s: Server, _):
    key = str(random.getrandbits(40))
    codes = [s.ask("extensions", descriptor(("api_key", key)), hits=1).overall_code for _ in range(4)]
    assert codes == [OK, OK, OK, OVER_LIMIT], codes
    r = s.ask("extensions", descriptor(("burst", key)), hits=1)
    # A GCRA of 60 per hour (one a minute) with burst 2; a window of one
    # hour reports the unit HOUR.
    expect(r.statuses[0], OK, 60, Unit.HOUR, 1)
    assert r.statuses[0].duration_until_reset.seconds == 60, r.statuses[0]


def hits_addend_and_headers(s: Server, _):
    avoid_window_edge(60, 5)
    value = str(random.getrandbits(40))
    r = s.ask("another", descriptor(("key2", value)), hits=5)
    expect(r.statuses[0], OK, 20, Unit.MINUTE, 15)
    r = s.ask("another", descriptor(("key2", value), hits=0), hits=5)
    expect(r.statuses[0], OK, 20, Unit.MINUTE, 15)
    headers = {h.key: h.value for h in r.response_headers_to_add}
    assert headers["RateLimit-Policy"] == '"another.key2";q=20;w=60', headers
    assert headers["RateLimit"].startswith('"another.key2";r=15;t='), headers


def a_request_limit_is_a_fixed_window_of_its_domain(s: Server, _):
    avoid_window_edge(60, 5)
    d = descriptor(("anything", str(random.getrandbits(40))), limit=(2, Unit.MINUTE))
    codes = [s.ask("basic", d, hits=1).overall_code for _ in range(3)]
    assert codes == [OK, OK, OVER_LIMIT], codes


def malformed_requests_are_invalid_argument(s: Server, _):
    for domain, descriptors in (("", [descriptor(("key1", "x"))]), ("basic", []),
                                ("basic", [descriptor(("key1", "x"), limit=(1, Unit.UNKNOWN))])):
        try:
            s.ask(domain, *descriptors, hits=1)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
            assert e.details(), e
        else:
            raise AssertionError(f"{domain!r} {descriptors} was answered")


def json_is_the_same_service(s: Server, _):
    body = json.dumps({"domain": "basic", "descriptors": [
        {"entries": [{"key": "one_per_minute", "value": str(random.getrandbits(40))}]}]}).encode()
    avoid_window_edge(60, 3)
    status, ctype, answer = s.json(body)
    assert status == 200, (status, answer)
    assert ctype.startswith("application/json"), ctype
    assert answer["overallCode"] == "OK", answer
    assert answer["statuses"][0]["currentLimit"] == {"requestsPerUnit": 1, "unit": "MINUTE"}, answer
    assert answer["statuses"][0]["durationUntilReset"].endswith("s"), answer
    status, _, answer = s.json(body)
    assert (status, answer["overallCode"]) == (429, "OVER_LIMIT"), (status, answer)
    status, ctype, answer = s.json(b'{"domain": ""}')
    assert status == 400 and ctype == "application/problem+json", (status, ctype)
    assert answer["status"] == 400 and answer["detail"], answer


def a_reload_adds_a_domain_and_keeps_counters(s: Server, rules: Path):
    # "another"'s counter is read before and after the reload: both in one
    # hourly window, with room for the whole wait for the reload.
    avoid_window_edge(3600, RELOAD_WAIT + 10)
    counted = str(random.getrandbits(40))
    before = s.ask("another", descriptor(("key3", counted)), hits=1).statuses[0].limit_remaining
    # The reference's testConfigReload: a domain that does not exist yet.
    r = s.ask("reload", descriptor(("block", "foo")), hits=1)
    expect(r.statuses[0], OK, remaining=0)
    shutil.copy(REFERENCE / "integration" / "reload.yaml", rules / "reload.yaml")
    deadline = time.time() + RELOAD_WAIT
    while s.ask("reload", descriptor(("block", "foo")), hits=1).overall_code != OVER_LIMIT:
        assert time.time() < deadline, \
            f"the new file was not picked up within {RELOAD_WAIT} s:\n" + s.text()
        time.sleep(0.05)
    r = s.ask("reload", descriptor(("key1", "foo")), hits=1)
    expect(r.statuses[0], OK, 50, Unit.SECOND)
    after = s.ask("another", descriptor(("key3", counted)), hits=1).statuses[0].limit_remaining
    assert after == before - 1, (before, after)
    # A broken file changes nothing; the old rules keep answering.
    (rules / "broken.yaml").write_text("domain: broken\ndescriptors:\n  - key: k\n    quota_mode: true\n")
    s.wait_for_log("broken.yaml:4:5")
    assert s.ask("reload", descriptor(("block", "foo")), hits=1).overall_code == OVER_LIMIT
    (rules / "broken.yaml").unlink()
    (rules / "reload.yaml").unlink()
    deadline = time.time() + RELOAD_WAIT
    while s.ask("reload", descriptor(("block", "foo")), hits=1).overall_code != OK:
        assert time.time() < deadline, \
            f"the removal was not picked up within {RELOAD_WAIT} s:\n" + s.text()
        time.sleep(0.05)


CASES = [
    unknown_domain_is_ok_without_a_limit,
    a_per_second_limit_counts_the_first_request,
    a_minute_limit_counts_down_then_refuses,
    two_keys_of_one_domain_are_all_or_nothing,
    duration_until_reset_counts_down,
    share_threshold_shares_one_counter,
    replaces_lifts_a_banned_limit,
    a_wildcard_child_triggers_its_limit,
    shadow_mode_never_refuses,
    detailed_metric_limits_per_value,
    unlimited_reports_the_largest_remaining,
    extension_keys_choose_the_algorithm,
    hits_addend_and_headers,
    a_request_limit_is_a_fixed_window_of_its_domain,
    malformed_requests_are_invalid_argument,
    json_is_the_same_service,
    a_reload_adds_a_domain_and_keeps_counters,
]


def redis_down_is_not_serving(s: Server, redis: subprocess.Popen, port: int) -> subprocess.Popen:
    redis.terminate()
    redis.wait(timeout=10)
    s.wait_for_health(health_pb2.HealthCheckResponse.NOT_SERVING)
    r = s.ask("basic", descriptor(("key1", "down")), hits=1)
    # --on-store-error open (the default): OK, no quota claimed.
    assert r.overall_code == OK and not r.statuses[0].HasField("current_limit"), r
    redis = start_redis(port)
    s.wait_for_health(health_pb2.HealthCheckResponse.SERVING)
    return redis


# --- an envoyproxy/ratelimit deployment's environment ----------------------

class ReferenceDeployment(Server):
    """`ratewarden serve` with no flag and no RATEWARDEN_* variable, in
    the environment of the reference server's own docker-compose.yml
    (USE_STATSD=false, LOG_LEVEL=debug, REDIS_SOCKET_TYPE=tcp, REDIS_URL,
    RUNTIME_ROOT, RUNTIME_SUBDIRECTORY=ratelimit, MEMCACHE_HOST_PORT),
    with a password on its Redis (REDIS_AUTH), the response headers on,
    and free loopback ports given as a deployment gives them (HOST, PORT,
    GRPC_HOST, GRPC_PORT). The runtime directory holds the reference's
    examples (example.yaml among them, whose quota_mode ratewarden
    refuses) and integration configs under ratelimit/config/."""

    def __init__(self, binary: str, tmp: Path, redis_port: int, password: str, **extra: str):
        self.http_port, self.grpc_port = free_port(), free_port()
        self.runtime = tmp / "runtime"
        config = self.runtime / "ratelimit" / "config"
        config.mkdir(parents=True, exist_ok=True)
        for f in [*(REFERENCE / "examples").glob("*.yaml"),
                  *(REFERENCE / "integration" / "config").glob("*.yaml")]:
            shutil.copy(f, config / f.name)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RATEWARDEN_")}
        self.env.update({
            "USE_STATSD": "false",
            "LOG_LEVEL": "debug",
            "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": f"127.0.0.1:{redis_port}",
            "RUNTIME_ROOT": str(self.runtime),
            "RUNTIME_SUBDIRECTORY": "ratelimit",
            "MEMCACHE_HOST_PORT": "memcached:11211",
            "REDIS_AUTH": password,
            "REDIS_POOL_SIZE": "10",
            # Exact answers on a loaded machine, as STORE_TIMEOUT_MS.
            "REDIS_TIMEOUT": "10s",
            "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
            "HOST": "127.0.0.1",
            "PORT": str(self.http_port),
            "GRPC_HOST": "127.0.0.1",
            "GRPC_PORT": str(self.grpc_port),
            **extra,
        })
        self.start([binary, "serve"], self.env, tmp / "ratewarden-reference-env.log", cwd=tmp)

    def healthcheck(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/healthcheck",
                                    timeout=CALL_TIMEOUT) as r:
            return r.status, r.headers.get("Content-Type"), r.read()


def redis_dbsize(port: int, password: str) -> int:
    """DBSIZE of the Redis on `port`, over a raw socket (RESP)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(f"AUTH {password}\r\nDBSIZE\r\n".encode())
        data = b""
        while data.count(b"\r\n") < 2:
            chunk = c.recv(4096)
            assert chunk, data
            data += chunk
    auth, size = data.split(b"\r\n")[:2]
    assert auth == b"+OK", data
    return int(size[1:])


def the_reference_environment_starts_ratewarden_unchanged(binary: str, tmp: Path) -> None:
    redis_port = free_port()
    password = f"pw-{random.getrandbits(64):x}"
    redis = start_redis(redis_port, "--requirepass", password)
    s = None
    try:
        s = ReferenceDeployment(binary, tmp, redis_port, password)
        log = s.text()
        # Each variable read is named at INFO, the password never.
        for shown in ("RUNTIME_ROOT=", "RUNTIME_SUBDIRECTORY=ratelimit", "REDIS_SOCKET_TYPE=tcp",
                      f"REDIS_URL=127.0.0.1:{redis_port}", "REDIS_AUTH=<redacted>",
                      "REDIS_TIMEOUT=10s", "HOST=127.0.0.1", f"PORT={s.http_port}",
                      "GRPC_HOST=127.0.0.1", f"GRPC_PORT={s.grpc_port}",
                      "LIMIT_RESPONSE_HEADERS_ENABLED=true", "USE_STATSD=false",
                      "LOG_LEVEL=debug"):
            assert any("INFO" in line and "envoyproxy/ratelimit variable used" in line
                       and shown in line for line in log.splitlines()), f"{shown}:\n{log}"
        ignored = [line for line in log.splitlines() if "variables ignored" in line]
        assert ignored and "MEMCACHE_HOST_PORT=memcached:11211" in ignored[0] \
            and "REDIS_POOL_SIZE=10" in ignored[0], log
        assert password not in log, "the password is in the log"
        # example.yaml is refused alone, at the line of its first quota_mode.
        example = (REFERENCE / "examples" / "example.yaml").read_text().splitlines()
        line = next(i + 1 for i, l in enumerate(example) if l.strip().startswith("quota_mode:"))
        assert any("ERROR" in l and f"example.yaml:{line}:" in l for l in log.splitlines()), log
        # The other files decide, through the Redis of REDIS_URL and REDIS_AUTH.
        avoid_window_edge(60, 10)
        value = str(random.getrandbits(40))
        for i in range(21):
            r = s.ask("another", descriptor(("key2", value)), hits=1)
            if i < 20:
                expect(r.statuses[0], OK, 20, Unit.MINUTE, 19 - i)
            else:
                assert r.overall_code == OVER_LIMIT, r
            headers = {h.key: h.value for h in r.response_headers_to_add}
            assert headers["RateLimit-Limit"] == "20", headers
            assert headers["RateLimit-Remaining"] == str(max(19 - i, 0)), headers
            assert int(headers["RateLimit-Reset"]) == r.statuses[0].duration_until_reset.seconds
        r = s.ask("mongo_cps", descriptor(("database", "users")), hits=1)
        expect(r.statuses[0], OK, 500, Unit.SECOND)
        r = s.ask("rl", descriptor(("category", "account")), hits=1)
        expect(r.statuses[0], OK, remaining=0)
        assert redis_dbsize(redis_port, password) > 0
        assert s.healthcheck() == (200, "text/plain; charset=utf-8", b"OK")
    finally:
        if s is not None:
            s.stop()
        redis.terminate()
        redis.wait(timeout=10)


def what_would_change_decisions_stops_the_start(binary: str, tmp: Path) -> None:
    """REDIS_TLS=true cannot be honoured: refused at start, named, rather
    than connecting in plaintext."""
    (tmp / "runtime" / "ratelimit" / "config").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RATEWARDEN_")}
    env.update({"RUNTIME_ROOT": str(tmp / "runtime"), "RUNTIME_SUBDIRECTORY": "ratelimit",
                "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "127.0.0.1:6379", "REDIS_TLS": "true",
                "PORT": str(free_port()), "GRPC_PORT": str(free_port()), "HOST": "127.0.0.1",
                "GRPC_HOST": "127.0.0.1"})
    done = subprocess.run([binary, "serve"], env=env, cwd=tmp, capture_output=True, text=True,
                          timeout=CALL_TIMEOUT)
    assert done.returncode == 2, done
    assert "REDIS_TLS=true" in done.stderr and "refused" in done.stderr, done.stderr


REFERENCE_CASES = [
    the_reference_environment_starts_ratewarden_unchanged,
    what_would_change_decisions_stops_the_start,
]


def run_reference_environment(binary: str) -> int:
    # The cases run in their own directory (the working directory of a
    # deployment).
    binary = str(Path(binary).resolve())
    failures = 0
    for case in REFERENCE_CASES:
        with tempfile.TemporaryDirectory() as tmp_name:
            try:
                case(binary, Path(tmp_name))
                print(f"ok   env    {case.__name__}")
            except Exception:  # noqa: BLE001 - every failure is reported
                failures += 1
                print(f"FAIL env    {case.__name__}\n{traceback.format_exc()}")
    return failures


def run_store(binary: str, store: str) -> int:
    failures = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        rules = tmp / "rules"
        rules.mkdir()
        for f in (REFERENCE / "integration" / "config").glob("*.yaml"):
            shutil.copy(f, rules / f.name)
        (rules / "example.yaml").write_text(example_without_unimplemented())
        (rules / "extensions.yaml").write_text(EXTENSIONS)
        redis, redis_port, target = None, None, store
        if store == "redis":
            redis_port = free_port()
            redis = start_redis(redis_port)
            target = f"redis://127.0.0.1:{redis_port}/0"
        server = Server(binary, target, rules, tmp)
        try:
            for case in CASES:
                try:
                    case(server, rules)
                    print(f"ok   {store:6} {case.__name__}")
                except Exception:  # noqa: BLE001 - every failure is reported
                    failures += 1
                    print(f"FAIL {store:6} {case.__name__}\n{traceback.format_exc()}")
            if redis is not None:
                try:
                    redis = redis_down_is_not_serving(server, redis, redis_port)
                    print(f"ok   {store:6} redis_down_is_not_serving")
                except Exception:  # noqa: BLE001
                    failures += 1
                    print(f"FAIL {store:6} redis_down_is_not_serving\n{traceback.format_exc()}")
        finally:
            try:
                server.stop()
            except AssertionError as e:
                failures += 1
                print(f"FAIL {store:6} stop\n{e}")
            if redis is not None:
                redis.terminate()
                redis.wait(timeout=10)
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the ratewarden binary")
    parser.add_argument("--stores", default="memory,sqlite,redis")
    args = parser.parse_args()
    random.seed()
    stores = args.stores.split(",")
    failures = sum(run_store(args.bin, store) for store in stores)
    if "redis" in stores:
        failures += run_reference_environment(args.bin)
    print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
