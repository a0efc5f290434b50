"""What the black-box tests in tests/ share: free loopback ports, a
redis-server of their own (never one the user runs), and a wait past a
fixed window's edge."""

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


def avoid_window_edge(window_secs: float, needed: float) -> None:
    """Waits for the next window when fewer than `needed` seconds are left
    in this one, so that what a case counts from now on, in a fixed window
    of `window_secs` (or of a multiple of it) on the real clock, falls in
    one window. Windows are aligned to the Unix epoch as ratewarden's are
    (a window of a day is a UTC day); the wait is at most `needed` seconds
    plus 50 ms. `needed`: a generous bound on how long the case counts
    from here, shorter than the window."""
    assert needed < window_secs, (needed, window_secs)
    left = window_secs - time.time() % window_secs
    if left < needed:
        time.sleep(left + 0.05)


def start_redis(port: int, *options: str) -> subprocess.Popen:
    """Debian's redis-server on 127.0.0.1:`port`, without persistence and
    with `options` (e.g. "--requirepass", "pw"), once it accepts
    connections (at most 10 s)."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", *options],
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
