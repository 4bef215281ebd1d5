#!/usr/bin/env python3
"""Time DuckDB and Polars on the kappa batch-benchmark queries.

Every timed run reads the CSV files from disk (parsing included; page cache warm),
with both engines limited to THREADS threads (default 2). Best of RUNS runs.

Queries (keys of the JSON output, per engine):
  count                  SELECT key, count(*) FROM fact GROUP BY key   -> CSV (unsorted)
  count_sorted           the same, ORDER BY key                        (kappa writes sorted output)
  group_sorted           SELECT key, count(*), sum(value), max(value) ... GROUP BY key ORDER BY key
  join_count             count(*) of fact JOIN dim USING (key)         (no output written)
  join_write             fact JOIN dim -> CSV key,value,attr           (unsorted)
  join_write_sorted      same, ORDER BY key, value, attr               (kappa writes sorted output)
  skew_join_count / skew_join_write / skew_join_write_sorted: the same on fact_skew.csv

Both engines get the column types up front (BIGINT key/value, VARCHAR attr), so no
type inference is timed.

If duckdb/polars are not importable, a virtualenv is created at benches/batch/.venv
(`python3 -m venv` + `pip install duckdb polars`) and the script re-runs itself
there. If that fails, or an engine fails to import or run, its timings are null and
a note says why; the script itself does not fail.

Each query runs in a child process of its own (`--single ENGINE QUERY`), so that
its peak memory (the child's max RSS, interpreter and engine included) is its own.

Prints one JSON object on stdout; progress goes to stderr.

Usage: peers.py DATA_DIR [--out-dir DIR] [--runs N] [--threads N] [--no-sorted]
"""

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv")
VENV_PY = os.path.join(VENV, "bin", "python")
ENGINES = ("duckdb", "polars")
QUERIES = ("count", "count_sorted", "group_sorted", "join_count", "join_write", "join_write_sorted",
           "skew_join_count", "skew_join_write", "skew_join_write_sorted")


def log(msg: str) -> None:
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def have(mod: str) -> bool:
    # find_spec, not import: polars must not be imported before POLARS_MAX_THREADS is set
    import importlib.util
    try:
        return importlib.util.find_spec(mod) is not None
    except Exception:
        return False


def ensure_venv(notes: list) -> None:
    """Re-exec inside benches/batch/.venv (creating it if needed) unless the engines
    are already importable here. Returns only if we should carry on in this process."""
    if os.environ.get("KAPPA_PEERS_NO_VENV") == "1" or all(have(m) for m in ENGINES):
        return
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        notes.append("running inside .venv but some engines are not importable")
        return
    try:
        if not os.path.exists(VENV_PY):
            log(f"creating virtualenv {VENV}")
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True,
                           stdout=sys.stderr, stderr=sys.stderr)
        probe = subprocess.run([VENV_PY, "-c", "import duckdb, polars"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode != 0:
            log("pip install duckdb polars (into .venv)")
            subprocess.run([VENV_PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "duckdb", "polars"], check=True, stdout=sys.stderr, stderr=sys.stderr)
    except Exception as e:  # venv module missing, no network, ...
        notes.append(f"could not set up {VENV} ({e}); engines that fail to import are skipped")
        log(notes[-1])
        return
    env = dict(os.environ, KAPPA_PEERS_NO_VENV="1")
    sys.stdout.flush()
    os.execve(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:], env)


def best_of(fn, runs: int):
    times, result = [], None
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, result


def warm(paths) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def csv_rows(path: str) -> int:
    """Data rows of a CSV file written with a header line."""
    with open(path, "rb") as f:
        return max(sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 24), b"")) - 1, 0)


# --------------------------------------------------------------------------- duckdb

def duckdb_queries(data: str, out: str, threads: int):
    import duckdb

    def rd_fact(name):
        p = os.path.join(data, name).replace("'", "''")
        return (f"read_csv('{p}', header=true, delim=',', "
                f"columns={{'key': 'BIGINT', 'value': 'BIGINT'}})")

    p_dim = os.path.join(data, "dim.csv").replace("'", "''")
    rd_dim = f"read_csv('{p_dim}', header=true, delim=',', columns={{'key': 'BIGINT', 'attr': 'VARCHAR'}})"

    def run(sql, fetch=False):
        con = duckdb.connect(config={"threads": threads})
        try:
            r = con.execute(sql)
            return r.fetchall() if fetch else None
        finally:
            con.close()

    def copy_to(select, path):
        q = path.replace("'", "''")
        return lambda: run(f"COPY ({select}) TO '{q}' (FORMAT csv, HEADER true)")

    qs = {}
    o = lambda n: os.path.join(out, f"duckdb_{n}.csv")
    qs["count"] = (copy_to(f"SELECT key, count(*) AS count FROM {rd_fact('fact.csv')} GROUP BY key",
                           o("count")), o("count"))
    qs["count_sorted"] = (copy_to(f"SELECT key, count(*) AS count FROM {rd_fact('fact.csv')} "
                                  "GROUP BY key ORDER BY key", o("count_sorted")), o("count_sorted"))
    qs["group_sorted"] = (copy_to(f"SELECT key, count(*) AS count, sum(value) AS sum_value, "
                                  f"max(value) AS max_value FROM {rd_fact('fact.csv')} "
                                  "GROUP BY key ORDER BY key", o("group_sorted")), o("group_sorted"))
    for prefix, fact in (("", "fact.csv"), ("skew_", "fact_skew.csv")):
        join = f"FROM {rd_fact(fact)} f JOIN {rd_dim} d ON f.key = d.key"
        qs[prefix + "join_count"] = (lambda join=join: run(f"SELECT count(*) {join}", fetch=True)[0][0], None)
        qs[prefix + "join_write"] = (copy_to(f"SELECT f.key, f.value, d.attr {join}", o(prefix + "join")),
                                     o(prefix + "join"))
        qs[prefix + "join_write_sorted"] = (
            copy_to(f"SELECT f.key, f.value, d.attr {join} ORDER BY 1, 2, 3", o(prefix + "join_sorted")),
            o(prefix + "join_sorted"))
    return duckdb.__version__, qs


# --------------------------------------------------------------------------- polars

def polars_queries(data: str, out: str, threads: int):
    os.environ["POLARS_MAX_THREADS"] = str(threads)  # must be set before the first import
    import polars as pl
    if hasattr(pl, "thread_pool_size") and pl.thread_pool_size() != threads:
        raise RuntimeError(f"polars uses {pl.thread_pool_size()} threads, wanted {threads} "
                           "(imported before POLARS_MAX_THREADS was set?)")

    fact_schema = {"key": pl.Int64, "value": pl.Int64}
    dim_schema = {"key": pl.Int64, "attr": pl.Utf8}
    scan_fact = lambda name: pl.scan_csv(os.path.join(data, name), schema=fact_schema)
    scan_dim = lambda: pl.scan_csv(os.path.join(data, "dim.csv"), schema=dim_schema)
    length = pl.len if hasattr(pl, "len") else pl.count
    o = lambda n: os.path.join(out, f"polars_{n}.csv")

    def write(lf_fn, path):
        return lambda: lf_fn().collect().write_csv(path)

    qs = {}
    qs["count"] = (write(lambda: scan_fact("fact.csv").group_by("key").agg(length().alias("count")),
                         o("count")), o("count"))
    qs["count_sorted"] = (write(lambda: scan_fact("fact.csv").group_by("key").agg(length().alias("count"))
                                .sort("key"), o("count_sorted")), o("count_sorted"))
    qs["group_sorted"] = (write(lambda: scan_fact("fact.csv").group_by("key").agg(
        length().alias("count"), pl.col("value").sum().alias("sum_value"),
        pl.col("value").max().alias("max_value")).sort("key"), o("group_sorted")), o("group_sorted"))
    for prefix, fact in (("", "fact.csv"), ("skew_", "fact_skew.csv")):
        joined = lambda fact=fact: scan_fact(fact).join(scan_dim(), on="key", how="inner")
        qs[prefix + "join_count"] = (lambda joined=joined: joined().select(length()).collect().item(), None)
        qs[prefix + "join_write"] = (write(joined, o(prefix + "join")), o(prefix + "join"))
        qs[prefix + "join_write_sorted"] = (
            write(lambda joined=joined: joined().sort(["key", "value", "attr"]), o(prefix + "join_sorted")),
            o(prefix + "join_sorted"))
    return pl.__version__, qs


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir")
    ap.add_argument("--out-dir", default=None, help="where query outputs go (default: a temp dir, removed)")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "3")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-sorted", action="store_true", help="skip the *_write_sorted variants")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of duckdb,polars")
    ap.add_argument("--single", nargs=2, metavar=("ENGINE", "QUERY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        return single(args)

    os.environ["POLARS_MAX_THREADS"] = str(args.threads)
    notes: list = []
    ensure_venv(notes)

    data = os.path.abspath(args.data_dir)
    files = [os.path.join(data, n) for n in ("fact.csv", "fact_skew.csv", "dim.csv")]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        log(f"missing input files: {missing}")
        return 2

    tmp_out = args.out_dir is None
    if tmp_out:
        import tempfile
        out = tempfile.mkdtemp(prefix="kappa-peers-")
    else:
        out = os.path.abspath(args.out_dir)
        os.makedirs(out, exist_ok=True)

    result = {
        "rows": csv_rows(files[0]),
        "threads": args.threads,
        "runs": args.runs,
        "python": platform.python_version(),
        "versions": {},
        **{e: None for e in ENGINES},
        "notes": notes,
        "output_rows": {},
        "all_times": {},
    }
    notes.append("join_write / skew_join_write output is unsorted; *_write_sorted adds ORDER BY key,value,attr")
    notes.append("count output is unsorted")
    notes.append("times are taken in-process: no interpreter start-up or module import (kappa's include process start-up)")

    warm(files)
    builders = {"duckdb": duckdb_queries, "polars": polars_queries}
    for engine in [e for e in args.engines.split(",") if e]:
        times = {q: None for q in QUERIES}
        result[engine] = times
        try:
            version, qs = builders[engine](data, out, args.threads)
            result["versions"][engine] = version
        except Exception as e:
            notes.append(f"{engine} skipped: {type(e).__name__}: {e}")
            log(notes[-1])
            continue
        result["all_times"][engine] = {}
        result["output_rows"][engine] = {}
        result.setdefault("max_rss_kib", {})[engine] = {}
        for q in QUERIES:
            if args.no_sorted and q.endswith("_sorted") and q not in ("count_sorted", "group_sorted"):
                continue
            child = subprocess.run(
                [sys.executable, os.path.abspath(__file__), data, "--out-dir", out, "--runs", str(args.runs),
                 "--threads", str(args.threads), "--single", engine, q],
                stdout=subprocess.PIPE, env=dict(os.environ, KAPPA_PEERS_NO_VENV="1"))
            try:
                r = json.loads(child.stdout)
            except ValueError:
                r = {"error": f"exit {child.returncode}, no result"}
            if "error" in r:
                notes.append(f"{engine} {q} failed: {r['error']}")
                log(notes[-1])
                continue
            best, all_t, n = r["best"], r["all"], r["rows"]
            times[q] = round(best, 4)
            result["all_times"][engine][q] = [round(t, 4) for t in all_t]
            result["output_rows"][engine][q] = n
            result["max_rss_kib"][engine][q] = r["max_rss_kib"]
            log(f"{engine:6} {q:24} best {best:8.3f}s  runs {' '.join(f'{t:.3f}' for t in all_t)}  "
                f"rows {n}  maxrss {r['max_rss_kib'] // 1024} MiB")

    if tmp_out:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


def single(args) -> int:
    """Runs one query of one engine, best of --runs; prints its times, rows and max RSS."""
    import resource
    engine, q = args.single
    builders = {"duckdb": duckdb_queries, "polars": polars_queries}
    try:
        _, qs = builders[engine](os.path.abspath(args.data_dir), args.out_dir, args.threads)
        fn, path = qs[q]
        best, all_t, r = best_of(fn, args.runs)
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 0
    n = r if path is None else csv_rows(path)
    if path is not None and q != "count":
        os.remove(path)  # keep the disk tidy: 10M-row join outputs are ~150 MB each
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"best": best, "all": all_t, "rows": n, "max_rss_kib": rss}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
