#!/usr/bin/env python3
"""End-to-end latency of `kappa stream`: from append to committed, visible table row.

One measurement, in a fresh log directory and table store under WORK_DIR:

  writer (this process)   writes CSV rows `key,ts` into the stdin pipe of
                          `kappa log produce TOPIC --fsync never --batch R --ack`
                          in ticks: every TICK ms, R = RATE * TICK / 1000 rows
                          whose `ts` column is the tick's wall-clock time in ms.
                          `--batch R` makes produce append exactly one batch per
                          tick, as soon as its last row is read (produce does not
                          flush a partial batch when its input pauses); each
                          append is acknowledged on stdout (`ack ...`), and the
                          writer timestamps the acks (the producer's share).
  kappa stream JOB        in the background, --workers W, default epochs.
  poller (a subprocess)   reads the output view through SQLite every POLL ms
                          (read-only connection, each SELECT its own read
                          transaction) and timestamps what it sees.

Workloads (`--workload`):

  ticks     `count-by key=ts`, records round-robin over the partitions. A tick
            is visible when its row in `counts` has count == R, i.e. when all
            of its records (on every partition) are committed. One latency
            sample per tick: first time the poller sees it complete, minus the
            time the writer wrote it. The output table is tiny (one row per
            tick): this measures the pipeline (log read, epochs, progress,
            commit), not the table writer.
  groupby   `group-by key=key agg=max:ts` over 100k uniform keys, produced
            with `--key key`: every record changes a table row (a retraction
            and an insertion per touched group), so the table writer works as
            it would on a real aggregation. Each tick ends with a marker record
            of key -1; a tick is visible when the poller sees the marker's
            `max_ts` reach the tick's ts (a later tick's marker also proves the
            earlier ones, which then get that observation time).

Samples from ticks written during the first WARMUP seconds are dropped. Prints
one JSON object on stdout (percentiles in ms, achieved rate, CPU seconds per
process, epochs committed, ...). Exit status 1 when kappa failed.

Usage: latency.py --kappa BIN --work DIR [--workload ticks|groupby] [--rate N]
                  [--seconds S] [--warmup S] [--tick-ms T] [--poll-ms P] [--workers W]
       latency.py poll ...   (internal: the poller)
"""

import argparse
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

NKEYS = 100_000
MARKER_KEY = -1


def now_ms() -> float:
    return time.time_ns() / 1e6


# ----------------------------------------------------------------------------- poller
def poll_main(argv) -> int:
    ap = argparse.ArgumentParser(prog="latency.py poll")
    ap.add_argument("--db", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--rows-per-tick", type=int, required=True)
    ap.add_argument("--poll-ms", type=float, required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    period = a.poll_ms / 1000.0
    conn = None
    # ticks: ts -> first time seen complete; groupby: list of (time, marker max_ts) changes
    complete = {}
    changes = []
    lo = -1  # ticks: lowest ts not yet seen complete (rows below it are done)
    last = None
    polls = 0
    query_ms = 0.0
    errors = 0
    while not os.path.exists(a.stop_file):
        t0 = time.perf_counter()
        try:
            if conn is None:
                if not os.path.exists(a.db):
                    time.sleep(0.01)
                    continue
                conn = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=5)
            if a.workload == "ticks":
                rows = conn.execute("SELECT ts, count FROM counts WHERE ts >= ?", (lo,)).fetchall()
                seen = now_ms()
                for ts, count in rows:
                    if count >= a.rows_per_tick and ts not in complete:
                        complete[ts] = seen
                pending = [ts for ts, c in rows if c < a.rows_per_tick]
                if pending:
                    lo = min(pending)
                elif rows:
                    lo = max(ts for ts, _ in rows) + 1
            else:
                row = conn.execute("SELECT max_ts FROM groups WHERE key = ?", (MARKER_KEY,)).fetchone()
                seen = now_ms()
                if row is not None and row[0] != last:
                    last = row[0]
                    changes.append((seen, last))
            polls += 1
        except sqlite3.OperationalError:
            # the view does not exist yet (the stream has not created its deployment)
            errors += 1
            if conn is not None:
                conn.close()
                conn = None
            time.sleep(0.01)
            continue
        dt = time.perf_counter() - t0
        query_ms += dt * 1000
        if dt < period:
            time.sleep(period - dt)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with open(a.out, "w") as f:
        json.dump({"complete": sorted(complete.items()), "changes": changes, "polls": polls,
                   "query_ms_mean": query_ms / max(polls, 1), "not_ready": errors,
                   "cpu_s": ru.ru_utime + ru.ru_stime}, f)
    return 0


# ----------------------------------------------------------------------------- helpers
def percentile(sorted_xs, p):
    if not sorted_xs:
        return None
    k = (len(sorted_xs) - 1) * p / 100.0
    i = int(k)
    j = min(i + 1, len(sorted_xs) - 1)
    return sorted_xs[i] + (sorted_xs[j] - sorted_xs[i]) * (k - i)


def wait_rusage(proc, timeout):
    """Waits for proc with a timeout; returns (returncode, cpu seconds) via wait4."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            return None, None
        time.sleep(0.02)


def kill_wait(proc, sig=signal.SIGTERM, timeout=20):
    if proc.poll() is not None:
        return proc.returncode, None
    proc.send_signal(sig)
    rc, cpu = wait_rusage(proc, timeout)
    if rc is None:
        proc.kill()
        rc, cpu = wait_rusage(proc, 5)
    return rc, cpu


# ----------------------------------------------------------------------------- measurement
def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "poll":
        return poll_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kappa", required=True)
    ap.add_argument("--work", required=True, help="scratch directory (wiped)")
    ap.add_argument("--workload", choices=["ticks", "groupby"], default="ticks")
    ap.add_argument("--rate", type=int, default=50_000, help="records per second (default 50000)")
    ap.add_argument("--seconds", type=float, default=20, help="measured seconds (default 20)")
    ap.add_argument("--warmup", type=float, default=3, help="seconds dropped at the start (default 3)")
    ap.add_argument("--tick-ms", type=float, default=10, help="ms between appends (default 10)")
    ap.add_argument("--poll-ms", type=float, default=2, help="ms between polls (default 2)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    rows_per_tick = max(1, round(a.rate * a.tick_ms / 1000))
    marker = a.workload == "groupby"
    batch = rows_per_tick + (1 if marker else 0)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    log_dir = os.path.join(a.work, "log")
    db = os.path.join(a.work, "tables.db")
    env = dict(os.environ, KAPPA_LOG_DIR=log_dir, KAPPA_TABLE_DB=db)
    topic = "lat"
    subprocess.run([a.kappa, "log", "create", topic, "--partitions", str(a.partitions)], env=env, check=True,
                   stdout=subprocess.DEVNULL)

    produce_cmd = [a.kappa, "log", "produce", topic, "--fsync", "never", "--batch", str(batch), "--ack"]
    if a.workload == "ticks":
        job = ["count-by", "--input", f"input={topic}", "--param", "key=ts"]
    else:
        produce_cmd += ["--key", "key"]
        job = ["group-by", "--input", f"input={topic}", "--param", "key=key", "--param", "agg=max:ts"]
    stream_cmd = [a.kappa, "stream", *job, "--workers", str(a.workers)]

    produce_err = open(os.path.join(a.work, "produce.stderr"), "w")
    producer = subprocess.Popen(produce_cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=produce_err, bufsize=0)
    acks = []  # wall-clock ms of each ack line

    def read_acks():
        for line in producer.stdout:
            if line.startswith(b"ack"):
                acks.append(now_ms())

    ack_thread = threading.Thread(target=read_acks, daemon=True)
    ack_thread.start()

    rng = random.Random(a.seed)
    keys = [str(k).encode() for k in range(NKEYS)]
    choices = rng.choices
    ticks = []  # (ts, write time ms) of every tick
    last_ts = 0
    counter = 0

    def write_tick():
        nonlocal last_ts, counter
        t = now_ms()
        ts = max(int(t), last_ts + 1)  # one ts per tick: ticks are >= 1 ms apart
        last_ts = ts
        tsb = b",%d\n" % ts
        if marker:
            body = tsb.join(choices(keys, k=rows_per_tick)) + tsb + b"%d" % MARKER_KEY + tsb
        else:
            # key column unused by `count-by key=ts`; records go round-robin over partitions
            body = tsb.join(keys[(counter + i) % NKEYS] for i in range(rows_per_tick)) + tsb
            counter += rows_per_tick
        producer.stdin.write(body)
        ticks.append((ts, t))

    # The topic must have its columns before the stream starts: first tick, wait for its ack.
    producer.stdin.write(b"key,ts\n")
    write_tick()
    deadline = time.monotonic() + 10
    while not acks and time.monotonic() < deadline:
        time.sleep(0.005)
    if not acks:
        print("error: kappa log produce did not acknowledge the first batch", file=sys.stderr)
        kill_wait(producer)
        return 1

    stream_err_path = os.path.join(a.work, "stream.stderr")
    stream_err = open(stream_err_path, "w")
    t_stream = now_ms()
    stream = subprocess.Popen(stream_cmd, env=env, stdout=subprocess.DEVNULL, stderr=stream_err)
    stop_file = os.path.join(a.work, "poll.stop")
    poll_out = os.path.join(a.work, "poll.json")
    poller = subprocess.Popen([sys.executable, os.path.abspath(__file__), "poll", "--db", db,
                               "--workload", a.workload, "--rows-per-tick", str(rows_per_tick),
                               "--poll-ms", str(a.poll_ms), "--stop-file", stop_file, "--out", poll_out])

    # Ticks at the fixed rate, on an absolute schedule (a late tick is written at once, never skipped).
    period = a.tick_ms / 1000.0
    start = time.monotonic()
    total_ticks = int((a.warmup + a.seconds) / period)
    failed = None
    max_late = 0.0
    for i in range(1, total_ticks + 1):
        delay = start + i * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            max_late = max(max_late, -delay * 1000)
        if stream.poll() is not None:
            failed = f"kappa stream exited early with status {stream.returncode}"
            break
        try:
            write_tick()
        except BrokenPipeError:
            failed = "kappa log produce exited early (broken pipe)"
            break
    t_end_write = now_ms()
    writer_elapsed = time.monotonic() - start
    producer.stdin.close()
    prc, produce_cpu = wait_rusage(producer, 30)
    ack_thread.join(timeout=5)

    # Wait (up to 15 s) for the last tick to become visible, then stop everything.
    last_visible = None
    if failed is None:
        deadline = time.monotonic() + 15
        want = ticks[-1][0]
        while time.monotonic() < deadline and stream.poll() is None:
            try:
                c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
                if marker:
                    r = c.execute("SELECT max_ts FROM groups WHERE key = ?", (MARKER_KEY,)).fetchone()
                    ok = r is not None and r[0] >= want
                else:
                    r = c.execute("SELECT count FROM counts WHERE ts = ?", (want,)).fetchone()
                    ok = r is not None and r[0] >= rows_per_tick
                c.close()
            except sqlite3.OperationalError:
                ok = False
            if ok:
                last_visible = now_ms()
                break
            time.sleep(0.01)
    time.sleep(0.05)
    open(stop_file, "w").close()
    poller.wait(timeout=30)
    src, stream_cpu = kill_wait(stream, signal.SIGTERM)
    produce_err.close()
    stream_err.close()

    with open(poll_out) as f:
        polled = json.load(f)
    stats = {}
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        r = c.execute("SELECT epochs, records_applied FROM kappa_deployments ORDER BY id DESC LIMIT 1").fetchone()
        stats = {"epochs": r[0], "records_applied": r[1]}
        c.close()
    except Exception as e:  # noqa: BLE001 - report, do not fail the run
        stats = {"error": str(e)}

    # Visibility time of each tick.
    visible = {}
    if marker:
        changes = polled["changes"]
        j = 0
        for ts, _ in ticks:
            while j < len(changes) and (changes[j][1] is None or changes[j][1] < ts):
                j += 1
            if j < len(changes):
                visible[ts] = changes[j][0]
    else:
        visible = {int(ts): t for ts, t in polled["complete"]}

    cut = t_stream + a.warmup * 1000
    measured = [(ts, t) for ts, t in ticks if t >= cut]
    lat = sorted(visible[ts] - t for ts, t in measured if ts in visible)
    missing = sum(1 for ts, _ in measured if ts not in visible)
    # Producer share: write -> ack of the same tick (one append per tick).
    ack_lat = sorted(acks[i] - ticks[i][1] for i in range(min(len(acks), len(ticks))) if ticks[i][1] >= cut)
    span_s = (measured[-1][1] - measured[0][1]) / 1000 if len(measured) > 1 else 0
    achieved = (len(measured) - 1) * (batch) / span_s if span_s > 0 else 0
    result = {
        "workload": a.workload,
        "job": " ".join(job),
        "rate_target": a.rate,
        "rate_achieved": round(achieved),
        "tick_ms": a.tick_ms,
        "rows_per_tick": rows_per_tick,
        "records_per_append": batch,
        "poll_ms": a.poll_ms,
        "seconds": a.seconds,
        "warmup_s": a.warmup,
        "ticks_measured": len(measured),
        "ticks_not_visible": missing,
        "latency_ms": {
            "p50": percentile(lat, 50), "p90": percentile(lat, 90), "p99": percentile(lat, 99),
            "max": lat[-1] if lat else None, "min": lat[0] if lat else None,
        },
        "producer_ack_ms": {"p50": percentile(ack_lat, 50), "p99": percentile(ack_lat, 99),
                            "max": ack_lat[-1] if ack_lat else None},
        "writer_max_late_ms": max_late,
        "writer_elapsed_s": writer_elapsed,
        "drain_after_last_write_ms": (last_visible - t_end_write) if last_visible else None,
        "poller": {"polls": polled["polls"], "query_ms_mean": polled["query_ms_mean"],
                   "cpu_s": polled["cpu_s"]},
        "cpu_s": {"stream": stream_cpu, "produce": produce_cpu, "poller": polled["cpu_s"],
                  "writer": resource.getrusage(resource.RUSAGE_SELF).ru_utime
                  + resource.getrusage(resource.RUSAGE_SELF).ru_stime},
        "catalog": stats,
        "exit": {"stream": src, "produce": prc},
        "stream_stderr_tail": open(stream_err_path).read().splitlines()[-4:],
        "error": failed,
    }
    print(json.dumps(result, indent=1))
    ok = failed is None and src == 0 and prc == 0 and missing == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
