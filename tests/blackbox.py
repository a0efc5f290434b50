"""What the black-box tests in tests/ share: free loopback ports and a
redis-server of their own (never one the user runs)."""

import socket
import subprocess
import time

# `--store-timeout-ms` for a ratewarden on such a Redis, as the Rust tests'
# TEST_STORE_TIMEOUT_MS (10 s, not the default 100 ms): the tests expect
# exact answers, and with 100 ms a call slowed by a busy machine fails
# open or closed at random. A dead Redis still fails calls at once (the
# connection is refused, then the breaker fails fast).
STORE_TIMEOUT_MS = "10000"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int) -> subprocess.Popen:
    """Debian's redis-server on 127.0.0.1:`port`, without persistence,
    once it accepts connections (at most 10 s)."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"redis-server did not start on port {port}")


def stop_server(proc: subprocess.Popen, log, seconds: float = 15) -> None:
    """SIGTERM to a `ratewarden serve`, then wait `seconds` for it; kills
    it and fails when it does not stop in time. Closes its log file."""
    try:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"ratewarden did not stop within {seconds} s of SIGTERM")
    finally:
        log.close()
