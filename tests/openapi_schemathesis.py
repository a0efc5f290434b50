#!/usr/bin/env python3
"""schemathesis (PyPI) against ratewarden's OpenAPI document.

Starts `ratewarden serve` on a free loopback port (memory store, the
policies and Envoy rules below, an admin key), runs every schemathesis check against
GET /openapi.json with tests/schemathesis.toml, and stops the server.
Exit status: schemathesis's (0 when every check passed).

    python3 tests/openapi_schemathesis.py --bin target/release/ratewarden \
        --schemathesis target/python/bin/schemathesis
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from blackbox import free_port

ADMIN_KEY = "schemathesis-admin-key"

# Generous limits, so that generated requests reach the logic instead of
# 429, and one tight policy of each algorithm, so that denials are seen.
CONFIG = """
ping_limit = 100000
check_limit = 100000

[[policies]]
name = "api"
algorithm = "gcra"
limit = 100000
window = "1m"

[[policies]]
name = "tight"
algorithm = "fixed_window"
limit = 1
window = "1h"

[[policies]]
name = "log"
algorithm = "sliding_log"
limit = 100
window = "10s"

[[policies]]
name = "counter"
algorithm = "sliding_window"
limit = 100
window = "10s"

[[policies]]
name = "dry"
algorithm = "fixed_window"
limit = 1
window = "1m"
shadow = true

# For /v1/authorize: a generous policy keyed by every kind of part, and a
# tight one under /tight/, so that forwarded denials are seen.
[[policies]]
name = "forwarded"
algorithm = "gcra"
limit = 100000
window = "1m"
key = ["client_ip", "method", "path", "query:user", "header:x-forwarded-for", "literal:fa"]

[[policies]]
name = "forwarded-tight"
algorithm = "fixed_window"
limit = 1
window = "1h"
key = ["literal:all"]
match = { methods = ["GET"], path = "/tight/*" }
"""


# Envoy rules for POST /json (the schema's example uses this domain).
ENVOY_RULES = """
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: tight
    rate_limit: {unit: hour, requests_per_unit: 1}
"""


def wait_until_up(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"ratewarden exited with {proc.returncode}:\n{log.read_text()}")
        try:
            urllib.request.urlopen(f"{base}/openapi.json", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"ratewarden did not answer:\n{log.read_text()}")


def main() -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the ratewarden binary")
    parser.add_argument("--schemathesis", required=True, help="the schemathesis command")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "ratewarden.toml"
        config.write_text(CONFIG)
        rules = Path(tmp) / "ratelimit.yaml"
        rules.write_text(ENVOY_RULES)
        log = Path(tmp) / "ratewarden.log"
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = dict(os.environ, RATEWARDEN_ADMIN_KEY=ADMIN_KEY, RATEWARDEN_LOG="warn")
        with log.open("w") as log_file:
            proc = subprocess.Popen(
                [args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--store", "memory",
                 "--config", str(config), "--envoy-config", str(rules)],
                env=env, stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            wait_until_up(base, proc, log)
            # One worker: schemathesis's workers are threads, and CPython
            # 3.11's ast.parse, which Hypothesis calls to describe its
            # filters, is not safe in two threads at once (it fails with
            # "SystemError: AST constructor recursion depth mismatch",
            # cpython#106905), so two workers fail at random.
            run = subprocess.run(
                [args.schemathesis, "--config-file", str(here / "schemathesis.toml"),
                 "run", f"{base}/openapi.json",
                 "-H", f"X-Admin-Key: {ADMIN_KEY}", "--workers", "1"],
                check=False)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if proc.returncode not in (0, -15):
            print(f"ratewarden exited with {proc.returncode}:\n{log.read_text()}")
            return 1
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
