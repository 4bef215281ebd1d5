#!/usr/bin/env python3
"""Latency of the live version of a table, with or without a concurrent replay.

Runs against an existing log and table store (nothing is wiped):

  kappa stream (live)     `kappa stream count-by -i input=TOPIC -p key=key --table TABLE`
                          in the background: the live version, resumed from its
                          committed offsets (it must already exist and be caught up).
  writer (this process)   writes `key,value` CSV rows into the stdin pipe of
                          `kappa log produce TOPIC --key key --fsync never --batch R+1 --ack`,
                          one tick every TICK ms: R rows with keys uniform over
                          0..99999, then one marker row `-1,<tick number>`.
  poller (a subprocess)   reads `SELECT count FROM TABLE WHERE key = -1` (the view,
                          so the live version) every POLL ms over a read-only
                          connection. Tick i is visible when that count reaches
                          c0 + i (c0: the marker count before the run).
  replay (--replay)       after the warm-up, `kappa reprocess JOB ... --swap manual
                          --until-caught-up -q` replays the whole topic into the next
                          version beside the live one and exits once caught up;
                          the writer goes on for --tail seconds after it exited.

On start the live stream rebuilds its state from the whole log (epoch 0) before
it reads new records, so the warm-up (--warmup s) starts when the first marker is
visible; ticks written before its end are not measured, and the replay starts
at its end.

Latency of a tick = first time the poller sees its marker counted - time the
writer handed the tick to produce. Reported separately for the ticks written
while the replay ran ("during") and the other measured ticks ("outside"); without
--replay, every tick after the warm-up is "outside". The building version
is left behind (the caller drops it). One JSON object on stdout.

Usage: latency_replay.py --kappa BIN --log-dir DIR --db PATH [--rate N]
          [--seconds S] [--replay] [--replay-args "group-by -p key=key -p agg=count,sum:value"]
       latency_replay.py poll ...   (internal)
"""

import argparse
import json
import os
import random
import resource
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time

NKEYS = 100_000
MARKER = -1


def now_ms() -> float:
    return time.time_ns() / 1e6


def poll_main(argv) -> int:
    ap = argparse.ArgumentParser(prog="latency_replay.py poll")
    ap.add_argument("--db", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--poll-ms", type=float, required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    period = a.poll_ms / 1000.0
    conn = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True, isolation_level=None, timeout=5)
    q = f'SELECT count FROM "{a.table}" WHERE key = ?'
    changes, polls, errors, query_ms, last = [], 0, 0, 0.0, None
    while not os.path.exists(a.stop_file):
        t0 = time.perf_counter()
        try:
            row = conn.execute(q, (MARKER,)).fetchone()
        except sqlite3.OperationalError:
            errors += 1
            time.sleep(0.005)
            continue
        seen = now_ms()
        c = row[0] if row else 0
        if c != last:
            last = c
            changes.append((seen, c))
        polls += 1
        dt = time.perf_counter() - t0
        query_ms += dt * 1000
        if dt < period:
            time.sleep(period - dt)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with open(a.out, "w") as f:
        json.dump({"changes": changes, "polls": polls, "errors": errors,
                   "query_ms_mean": query_ms / max(polls, 1), "cpu_s": ru.ru_utime + ru.ru_stime}, f)
    return 0


def percentile(xs, p):
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    i = int(k)
    j = min(i + 1, len(xs) - 1)
    return xs[i] + (xs[j] - xs[i]) * (k - i)


def summary(xs):
    xs = sorted(xs)
    return {"n": len(xs), "p50": percentile(xs, 50), "p90": percentile(xs, 90),
            "p99": percentile(xs, 99), "max": xs[-1] if xs else None}


def wait_rusage(proc, timeout):
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            return None, None
        time.sleep(0.02)


def kill_wait(proc, timeout=30):
    if proc.returncode is not None:
        return proc.returncode, None
    proc.send_signal(signal.SIGTERM)
    rc, cpu = wait_rusage(proc, timeout)
    if rc is None:
        proc.kill()
        rc, cpu = wait_rusage(proc, 5)
    return rc, cpu


def marker_count(db, table):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        r = c.execute(f'SELECT count FROM "{table}" WHERE key = ?', (MARKER,)).fetchone()
        return r[0] if r else 0
    finally:
        c.close()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "poll":
        return poll_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kappa", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--scratch", required=True, help="directory for stderr files and poller output")
    ap.add_argument("--topic", default="fact")
    ap.add_argument("--table", default="counts")
    ap.add_argument("--rate", type=int, default=10_000, help="records per second (default 10000)")
    ap.add_argument("--seconds", type=float, default=20,
                    help="measured seconds without --replay (default 20)")
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--tail", type=float, default=3, help="seconds written after the replay exits")
    ap.add_argument("--max-seconds", type=float, default=300, help="give up on the replay after this")
    ap.add_argument("--tick-ms", type=float, default=10)
    ap.add_argument("--poll-ms", type=float, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("--replay-args", default="group-by -p key=key -p agg=count,sum:value")
    ap.add_argument("--replay-workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()

    os.makedirs(a.scratch, exist_ok=True)
    env = dict(os.environ, KAPPA_LOG_DIR=a.log_dir, KAPPA_TABLE_DB=a.db)
    rows_per_tick = max(1, round(a.rate * a.tick_ms / 1000))
    c0 = marker_count(a.db, a.table)

    stream_err = open(os.path.join(a.scratch, "live.stderr"), "w")
    stream = subprocess.Popen([a.kappa, "stream", "count-by", "-i", f"input={a.topic}", "-p", "key=key",
                               "--table", a.table, "--workers", str(a.workers)],
                              env=env, stdout=subprocess.DEVNULL, stderr=stream_err)
    produce_err = open(os.path.join(a.scratch, "produce.stderr"), "w")
    producer = subprocess.Popen([a.kappa, "log", "produce", a.topic, "--key", "key", "--fsync", "never",
                                 "--batch", str(rows_per_tick + 1), "--ack"],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=produce_err,
                                bufsize=0)
    acks = []

    def read_acks():
        for line in producer.stdout:
            if line.startswith(b"ack"):
                acks.append(now_ms())

    threading.Thread(target=read_acks, daemon=True).start()
    stop_file = os.path.join(a.scratch, "poll.stop")
    poll_out = os.path.join(a.scratch, "poll.json")
    if os.path.exists(stop_file):
        os.unlink(stop_file)
    poller = subprocess.Popen([sys.executable, os.path.abspath(__file__), "poll", "--db", a.db,
                               "--table", a.table, "--poll-ms", str(a.poll_ms), "--stop-file", stop_file,
                               "--out", poll_out])

    rng = random.Random(a.seed)
    keys = [b"%d," % k for k in range(NKEYS)]
    producer.stdin.write(b"key,value\n")
    ticks = []  # write time (ms) of tick i+1
    period = a.tick_ms / 1000.0
    start = time.monotonic()
    t_start = now_ms()
    # The live stream first rebuilds its state from the whole log (epoch 0), so the
    # warm-up starts when the first tick is visible: measured ticks are written warmup s later.
    t_first_visible = None
    measure_from = None  # monotonic
    replay = None
    replay_ru = None
    replay_t = [None, None]
    replay_err = None
    failed = None
    max_late = 0.0
    i = 0
    end_at = start + a.max_seconds
    while True:
        i += 1
        target = start + i * period
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif measure_from is not None:
            max_late = max(max_late, -delay * 1000)
        now = time.monotonic()
        if measure_from is None and ticks and i % 5 == 0:
            try:
                if marker_count(a.db, a.table) > c0:
                    t_first_visible = now_ms()
                    measure_from = now + a.warmup
                    end_at = measure_from + a.seconds
            except sqlite3.OperationalError:
                pass
        if a.replay and measure_from is not None:
            if replay is None and now >= measure_from:
                replay_err = open(os.path.join(a.scratch, "replay.stderr"), "w")
                replay_t[0] = now_ms()
                replay = subprocess.Popen([a.kappa, "reprocess", *shlex.split(a.replay_args),
                                           "-i", f"input={a.topic}", "--table", a.table, "--swap", "manual",
                                           "--until-caught-up", "-q", "--workers", str(a.replay_workers)],
                                          env=env, stdout=subprocess.DEVNULL, stderr=replay_err)
            if replay is not None and replay_t[1] is None:
                pid, status, ru = os.wait4(replay.pid, os.WNOHANG)
                if pid == replay.pid:
                    replay.returncode = os.waitstatus_to_exitcode(status)
                    replay_ru = ru.ru_utime + ru.ru_stime
                    replay_t[1] = now_ms()
                    end_at = now + a.tail
            if replay is None or replay_t[1] is None:
                end_at = max(end_at, now + period)
        if now > start + a.max_seconds:
            failed = "did not finish within --max-seconds (live stream never caught up, or the replay did not end)"
            break
        if now >= end_at:
            break
        if stream.poll() is not None:
            failed = f"live kappa stream exited early with status {stream.returncode}"
            break
        vals = b"".join(k + b"%d\n" % v for k, v in zip(rng.choices(keys, k=rows_per_tick),
                                                         rng.choices(range(1_000_000), k=rows_per_tick)))
        t = now_ms()
        try:
            producer.stdin.write(vals + b"%d,%d\n" % (MARKER, len(ticks) + 1))
        except BrokenPipeError:
            failed = "kappa log produce exited early"
            break
        ticks.append(t)
    t_end_write = now_ms()
    producer.stdin.close()
    prc, produce_cpu = wait_rusage(producer, 30)

    # Wait up to 15 s for the last tick, then stop.
    last_visible = None
    deadline = time.monotonic() + 15
    while ticks and time.monotonic() < deadline and stream.poll() is None:
        try:
            if marker_count(a.db, a.table) >= c0 + len(ticks):
                last_visible = now_ms()
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.01)
    time.sleep(0.05)
    open(stop_file, "w").close()
    poller.wait(timeout=30)
    src, stream_cpu = kill_wait(stream)
    rrc, replay_cpu = (None, None)
    if replay is not None:
        if replay.returncode is None:
            rrc, replay_cpu = kill_wait(replay)
        else:
            rrc, replay_cpu = replay.returncode, replay_ru
    stream_err.close()
    produce_err.close()

    polled = json.load(open(poll_out))
    changes = polled["changes"]
    visible = [None] * len(ticks)
    j = 0
    for n in range(len(ticks)):
        need = c0 + n + 1
        while j < len(changes) and changes[j][1] < need:
            j += 1
        if j < len(changes):
            visible[n] = changes[j][0]
    cut = (t_first_visible + a.warmup * 1000) if t_first_visible else float("inf")
    during, outside, missing = [], [], 0
    for n, t in enumerate(ticks):
        if t < cut:
            continue
        if visible[n] is None:
            missing += 1
            continue
        lat = visible[n] - t
        if replay_t[0] is not None and replay_t[0] <= t and (replay_t[1] is None or t <= replay_t[1]):
            during.append(lat)
        else:
            outside.append(lat)
    ack_lat = sorted(acks[n] - ticks[n] for n in range(min(len(acks), len(ticks))) if ticks[n] >= cut)
    result = {
        "replay": a.replay,
        "replay_cmd": (f"kappa reprocess {a.replay_args} -i input={a.topic} --table {a.table} "
                       f"--swap manual --until-caught-up -q --workers {a.replay_workers}") if a.replay else None,
        "rate_target": a.rate,
        "rows_per_tick": rows_per_tick,
        "tick_ms": a.tick_ms,
        "ticks_written": len(ticks),
        "records_written": len(ticks) * (rows_per_tick + 1),
        "writer_seconds": (t_end_write - t_start) / 1000,
        "live_catch_up_s": (t_first_visible - t_start) / 1000 if t_first_visible else None,
        "warmup_s": a.warmup,
        "writer_max_late_ms": max_late,
        "latency_ms_outside_replay": summary(outside),
        "latency_ms_during_replay": summary(during),
        "ticks_not_visible": missing,
        "replay_seconds": (replay_t[1] - replay_t[0]) / 1000 if replay_t[1] else None,
        "replay_exit": rrc,
        "producer_ack_ms": summary(ack_lat),
        "drain_after_last_write_ms": (last_visible - t_end_write) if last_visible else None,
        "poller": {"polls": polled["polls"], "query_ms_mean": polled["query_ms_mean"], "errors": polled["errors"]},
        "cpu_s": {"live_stream": stream_cpu, "produce": produce_cpu, "replay": replay_cpu,
                  "poller": polled["cpu_s"]},
        "exit": {"live_stream": src, "produce": prc},
        "live_stderr_tail": open(os.path.join(a.scratch, "live.stderr")).read().splitlines()[-3:],
        "error": failed,
    }
    print(json.dumps(result, indent=1))
    ok = failed is None and prc == 0 and missing == 0 and (rrc in (None, 0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
