#!/usr/bin/env python3
"""Deterministic data generator for the kappa batch benchmark (stdlib only).

Writes into OUT_DIR:
  fact.csv       key,value   ROWS rows; key uniform over 0..99999, value uniform over 0..999999
  fact_skew.csv  key,value   ROWS rows; 30% of rows have the hot key 0, the rest uniform
                             over 0..99999 (so key 0 gets ~30.0007%)
  dim.csv        key,attr    100,000 rows; every key 0..99999 once (shuffled order),
                             attr = "a<0..999>"

Each file gets a `<name>.done` marker holding its generation parameters; a file
whose marker matches the requested parameters is not regenerated.

Usage: gen_data.py OUT_DIR [--rows N] [--seed S] [--jobs J]
"""

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from random import Random

NKEYS = 100_000
NVALUES = 1_000_000
NATTRS = 1_000
HOT_FRACTION = 0.3
CHUNK = 1_000_000  # rows generated and written per batch
FORMAT_VERSION = 1  # bump when the generated content changes


def _fact_tables(skew: bool):
    """Population tables: choosing uniformly from `keys` gives the key distribution."""
    keys = [f"{k}," for k in range(NKEYS)]
    if skew:
        # 1,000,000 slots: 300,000 hold the hot key, 700,000 cycle through all keys
        # (7 slots each), so a uniform pick is hot with exactly p = 0.3, else uniform.
        slots = 1_000_000
        hot = int(slots * HOT_FRACTION)
        keys = [keys[0]] * hot + keys * ((slots - hot) // NKEYS)
    values = [f"{v}\n" for v in range(NVALUES)]
    return keys, values


def _write_fact(path: str, rows: int, seed: int, skew: bool) -> None:
    rng = Random(seed)
    keys, values = _fact_tables(skew)
    choices = rng.choices
    add = str.__add__
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii", newline="", buffering=1 << 22) as f:
        f.write("key,value\n")
        left = rows
        while left > 0:
            n = min(CHUNK, left)
            ks = choices(keys, k=n)
            vs = choices(values, k=n)
            f.write("".join(map(add, ks, vs)))
            left -= n
    os.replace(tmp, path)


def _write_dim(path: str, seed: int) -> None:
    rng = Random(seed)
    keys = list(range(NKEYS))
    rng.shuffle(keys)
    attrs = rng.choices(range(NATTRS), k=NKEYS)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii", newline="") as f:
        f.write("key,attr\n")
        f.write("".join(f"{k},a{a}\n" for k, a in zip(keys, attrs)))
    os.replace(tmp, path)


def _job(out_dir: str, name: str, params: dict) -> tuple[str, float, bool]:
    path = os.path.join(out_dir, name)
    marker = path + ".done"
    try:
        with open(marker, encoding="utf-8") as f:
            if json.load(f) == params and os.path.exists(path):
                return name, 0.0, False
    except (OSError, ValueError):
        pass
    if os.path.exists(marker):
        os.remove(marker)
    t0 = time.perf_counter()
    if name == "dim.csv":
        _write_dim(path, params["seed"])
    else:
        _write_fact(path, params["rows"], params["seed"], params["skew"])
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(params, f, sort_keys=True)
        f.write("\n")
    return name, time.perf_counter() - t0, True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows in fact*.csv (default 10,000,000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="files generated in parallel (default: min(2, cores))")
    args = ap.parse_args()
    if args.rows < 0:
        ap.error("--rows must be >= 0")

    os.makedirs(args.out_dir, exist_ok=True)
    base = {"version": FORMAT_VERSION, "nkeys": NKEYS}
    jobs = [
        ("fact.csv", dict(base, rows=args.rows, seed=args.seed, skew=False, nvalues=NVALUES)),
        ("fact_skew.csv", dict(base, rows=args.rows, seed=args.seed + 1, skew=True,
                               hot_fraction=HOT_FRACTION, nvalues=NVALUES)),
        ("dim.csv", dict(base, rows=NKEYS, seed=args.seed + 2, nattrs=NATTRS)),
    ]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as ex:
            results = list(ex.map(_job, [args.out_dir] * len(jobs), *zip(*jobs)))
    else:
        results = [_job(args.out_dir, n, p) for n, p in jobs]
    for name, secs, made in results:
        state = f"generated in {secs:.1f}s" if made else "up to date, skipped"
        print(f"gen_data: {os.path.join(args.out_dir, name)}: {state}", file=sys.stderr)
    print(f"gen_data: total {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
