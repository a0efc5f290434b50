#!/usr/bin/env python3
"""Writes a deterministic request trace for `ratewarden replay`.

    scripts/gen-trace.py LINES KEYS SEED [--start-ms MS] [--rate N] > trace.txt

One request per line, `<unix_ms> <key> [<cost>]`, times never decreasing.
Keys are `key-<n>` for n in [0, KEYS), skewed so that a few keys are hot
(n = KEYS * u**3 for uniform u), which gives every algorithm a mix of
allowed and denied requests. About one request in ten carries a cost of
2 to 5; the others have none (cost 1). Requests arrive at --rate per
second on average (default 10000: a million lines span 100 s), with
uniformly random gaps, times truncated to whole milliseconds.

The same arguments always give the same bytes: the generator uses only
random.Random(SEED).random(), whose sequence Python keeps stable.
"""

import argparse
import random
import sys


def positive(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lines", type=positive, help="number of requests")
    parser.add_argument("keys", type=positive, help="number of distinct keys")
    parser.add_argument("seed", type=int, help="random seed")
    parser.add_argument("--start-ms", type=int, default=1_700_000_000_000,
                        help="time of the first request (default 1700000000000)")
    parser.add_argument("--rate", type=positive, default=10_000,
                        help="mean requests per second (default 10000)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    elapsed_ms = 0.0
    max_gap_ms = 2000.0 / args.rate
    out = sys.stdout
    chunk = []
    for _ in range(args.lines):
        elapsed_ms += rng.random() * max_gap_ms
        now = args.start_ms + int(elapsed_ms)
        key = int(args.keys * rng.random() ** 3)
        if rng.random() < 0.1:
            chunk.append(f"{now} key-{key} {2 + int(rng.random() * 4)}\n")
        else:
            chunk.append(f"{now} key-{key}\n")
        if len(chunk) >= 65536:
            out.write("".join(chunk))
            chunk.clear()
    out.write("".join(chunk))


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.stderr.close()
