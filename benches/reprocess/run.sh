#!/usr/bin/env bash
# kappa reprocessing benchmark (issue 5, "Performance"): replay of a retained log
# into the next table version by `kappa reprocess`, against `kappa run` of the
# same job on the same data as a file; and the live version's latency while the
# replay runs.
#
#   benches/reprocess/run.sh                        # full run (~2.5 minutes on 2 vCPUs, +30 s with PERF=1)
#   ROWS=200000 RUNS=1 LAT_SECS=5 benches/reprocess/run.sh   # quick smoke run
#
# 1. Throughput. ROWS `key,value` rows (benches/batch/gen_data.py: 100k uniform
#    keys; with the default ROWS the batch benchmark's benches/batch/data/fact.csv
#    is reused) are produced into topic `fact` (2 partitions, --key key,
#    --fsync never). Version 1 of table `counts` is streamed first:
#      kappa stream count-by -i input=fact -p key=key --table counts --until-caught-up -q
#    Then, RUNS times, the replay is timed from start to exit:
#      kappa reprocess group-by -i input=fact -p key=key -p agg=count,sum:value \
#          --table counts --until-caught-up -q
#    (a new version each run: the replay of the whole log, then the swap), and
#      kappa run group-by -i input=fact.csv -p key=key -p agg=count,sum:value -o DIR --overwrite
#    Best of RUNS each. Then `kappa table verify counts` recomputes the live
#    version from the offsets it applied (must print `identical`), and the
#    table is compared with the batch output row for row.
# 2. Latency (latency_replay.py; LAT=0 skips it). In a separate table store over
#    the same topic: v1 of `counts` (count-by) is streamed live in the background
#    while a producer appends RATE records/s (ticks of RATE/100 rows every 10 ms
#    plus a marker row); p50/p99 append -> visible in the view, once without and
#    once with a concurrent `kappa reprocess group-by ... --swap manual
#    --until-caught-up` of the whole topic into v2.
#
# Environment:
#   ROWS=N        rows (default 10000000)
#   RUNS=N        timed runs of reprocess and of run, best reported (default 2)
#   WORKERS=N     --workers for every kappa process (default 2)
#   RATE=N        records/s of the live feed in the latency part (default 10000)
#   REPLAY_WORKERS="1 2"  --workers of the concurrent replay, one latency run each
#                 (default "1 WORKERS": the goal lets a replay use fewer workers than the live stream)
#   LAT_SECS=S    measured seconds of the latency run without replay (default 20)
#   LAT=0         skip the latency part
#   PERF=1        also `perf record -g` one reprocess (report in results/logs/perf-reprocess.txt)
#   SKIP_BUILD=1  do not build; otherwise `cargo build --profile perf` only if HEAD is newer than the binary
#   LOCK_WAIT=S   wait at most S seconds for /tmp/kappa-bench.lock (default 900)
#   KAPPA=        binary (default target/perf/kappa)
#
# Scratch log and table stores go to benches/reprocess/work/ (wiped), the report
# to stdout, benches/reprocess/results/latest.md and a timestamped copy; stderr of
# every command and the raw JSON under benches/reprocess/results/logs/.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-2}
WORKERS=${WORKERS:-2}
RATE=${RATE:-10000}
REPLAY_WORKERS=${REPLAY_WORKERS:-1 $WORKERS}
LAT_SECS=${LAT_SECS:-20}
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
if [[ $ROWS == 10000000 ]]; then DATA=$ROOT/benches/batch/data; else DATA=$HERE/data/rows-$ROWS; fi
WORK=$HERE/work
RESULTS=$HERE/results
LOGS=$RESULTS/logs
LOCK=/tmp/kappa-bench.lock
mkdir -p "$RESULTS" "$LOGS"
TMP=$(mktemp -d /tmp/kappa-reprocess-bench.XXXXXX)
HAVE_LOCK=0
cleanup() {
    if ((HAVE_LOCK)) && grep -q "^$$ " "$LOCK" 2>/dev/null; then rm -f "$LOCK"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- build
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    head_t=$(git -C "$ROOT" log -1 --format=%ct)
    bin_t=$(stat -c %Y "$KAPPA" 2>/dev/null || echo 0)
    if ((head_t > bin_t)); then
        say "cargo build --profile perf (HEAD is newer than $KAPPA)"
        (cd "$ROOT" && cargo build --profile perf)
    fi
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found" >&2; exit 1; }
"$KAPPA" reprocess --help >/dev/null 2>&1 || { echo "error: $KAPPA has no 'reprocess' command" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "error: sqlite3 (the CLI) is needed to check the tables" >&2; exit 1; }

# ---------------------------------------------------------------- data
say "data (ROWS=$ROWS) in $DATA"
python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS" --jobs 1
FACT=$DATA/fact.csv
cat "$FACT" >/dev/null

# ---------------------------------------------------------------- lock
wait_s=${LOCK_WAIT:-900}
while ! (set -o noclobber; echo "$$ benches/reprocess/run.sh $(date -u +%FT%TZ)" >"$LOCK") 2>/dev/null; do
    if ((wait_s <= 0)); then
        echo "error: $LOCK still exists ($(cat "$LOCK" 2>/dev/null)); someone is timing. Giving up." >&2
        exit 1
    fi
    ((wait_s % 60 == 0)) && say "waiting for $LOCK ($(cat "$LOCK" 2>/dev/null || true))"
    sleep 5
    wait_s=$((wait_s - 5))
done
HAVE_LOCK=1
say "holding $LOCK"
echo "- load average when the timings started: $(cut -d' ' -f1-3 /proc/loadavg)" >"$TMP/notes.txt"
note() { printf '%s\n' "$*" >>"$TMP/notes.txt"; }

BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"   # timed: one run, "wall cpu rss" appended to $TMP/NAME.runs

LOG_DIR=$WORK/log
DB=$WORK/tables.db
export KAPPA_LOG_DIR=$LOG_DIR KAPPA_TABLE_DB=$DB
sql() { sqlite3 -batch -csv "$DB" "$1"; }
rm -rf "$WORK"; mkdir -p "$WORK"
: >"$TMP/catalog.txt"

# ---------------------------------------------------------------- produce, v1
"$KAPPA" log create fact --partitions 2 >/dev/null
say "produce $FACT into topic fact"
timed produce "$KAPPA" log produce fact --file "$FACT" --key key --fsync never
du -sb "$LOG_DIR/fact" | awk '{ print $1 }' >"$TMP/fact_bytes"
say "stream v1: count-by"
timed stream_v1 "$KAPPA" stream count-by -i input=fact -p key=key --table counts --until-caught-up -q \
    --workers "$WORKERS"

# ---------------------------------------------------------------- reprocess vs run
OUT=$WORK/out
status=ok
for ((i = 1; i <= RUNS; i++)); do
    say "reprocess run $i: group-by into the next version"
    timed reprocess "$KAPPA" reprocess group-by -i input=fact -p key=key -p agg=count,sum:value \
        --table counts --until-caught-up -q --workers "$WORKERS" || { status=FAILED; break; }
    sql "SELECT id, version, state, epochs, records_applied FROM kappa_deployments ORDER BY id" \
        >"$LOGS/catalog-after-reprocess-$i.csv" 2>&1 || true
    say "batch run $i: kappa run group-by on the file"
    timed batch "$KAPPA" run group-by -i "input=$FACT" -p key=key -p agg=count,sum:value \
        -o "$OUT" --overwrite --workers "$WORKERS" || { status=FAILED; break; }
done
echo "$status" >"$TMP/status"

if [[ $status == ok ]]; then
    say "kappa table verify counts"
    if "$KAPPA" table verify counts >"$LOGS/verify.stdout" 2>"$LOGS/verify.stderr"; then
        note "- \`kappa table verify counts\`: $(head -n 1 "$LOGS/verify.stdout")"
    else
        note "- **\`kappa table verify counts\` FAILED** (exit $?): $(head -n 3 "$LOGS/verify.stdout" "$LOGS/verify.stderr" | tr '\n' ' ')"
    fi
    sql "SELECT key, count, sum_value FROM counts" | sort >"$TMP/table.csv"
    tail -n +2 "$OUT/groups.csv" | sort >"$TMP/batch.csv"
    if cmp -s "$TMP/table.csv" "$TMP/batch.csv"; then
        note "- the live version of \`counts\` (v$((RUNS + 1))) is identical to the batch output ($(wc -l <"$TMP/batch.csv") rows)"
    else
        note "- **the live version of \`counts\` DIFFERS from the batch output** (diff in results/logs/table.diff)"
        diff "$TMP/table.csv" "$TMP/batch.csv" | head -n 50 >"$LOGS/table.diff" || true
    fi
    "$KAPPA" table status >"$LOGS/table-status.txt" 2>&1 || true
fi

if [[ ${PERF:-0} == 1 ]] && command -v perf >/dev/null; then
    say "perf record -g of one reprocess"
    perf record -g -o "$WORK/perf.data" -- "$KAPPA" reprocess group-by -i input=fact -p key=key \
        -p agg=count,sum:value --table counts --until-caught-up -q --workers "$WORKERS" \
        >/dev/null 2>"$LOGS/perf-record.stderr" || true
    perf report -i "$WORK/perf.data" --no-children --percent-limit 1 --stdio 2>/dev/null \
        | grep -v '^$' | head -n 400 >"$LOGS/perf-reprocess.txt" || true
    perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null \
        | grep -v '^#' | grep -v '^$' | head -n 20 >"$LOGS/perf-reprocess-dso.txt" || true
fi

# ---------------------------------------------------------------- latency
: >"$TMP/latency.jsonl"
if [[ ${LAT:-1} != 0 ]]; then
    LDB=$WORK/latency.db
    rm -f "$LDB" "$LDB-wal" "$LDB-shm"
    say "latency: v1 (count-by) of counts in $LDB catches up"
    KAPPA_TABLE_DB=$LDB "$KAPPA" stream count-by -i input=fact -p key=key --table counts --until-caught-up -q \
        --workers "$WORKERS" 2>"$LOGS/latency-v1.stderr"
    modes=(baseline)
    for rw in $REPLAY_WORKERS; do modes+=("replay-w$rw"); done
    for mode in "${modes[@]}"; do
        say "latency: live count-by at $RATE records/s, $mode"
        args=()
        if [[ $mode == replay-w* ]]; then
            args=(--replay --replay-workers "${mode#replay-w}")
            # The previous replay's version would be resumed, not replayed.
            KAPPA_TABLE_DB=$LDB "$KAPPA" table status --csv 2>/dev/null | python3 -c 'import csv, sys
for r in csv.DictReader(sys.stdin):
    if r["state"] == "building": print(r["version"].lstrip("v"))' |
                while read -r v; do KAPPA_TABLE_DB=$LDB "$KAPPA" table drop counts --version "$v" >/dev/null; done
        fi
        if python3 "$HERE/latency_replay.py" --kappa "$KAPPA" --log-dir "$LOG_DIR" --db "$LDB" \
            --scratch "$WORK/lat-$mode" --rate "$RATE" --seconds "$LAT_SECS" --workers "$WORKERS" \
            "${args[@]}" >"$LOGS/latency-$mode.json" 2>"$LOGS/latency-$mode.stderr"; then :
        else
            echo "   latency $mode reported a problem (see $LOGS/latency-$mode.*)" >&2
        fi
        cp "$WORK/lat-$mode/"*.stderr "$LOGS/" 2>/dev/null || true
        for f in "$WORK/lat-$mode/"*.stderr; do [[ -f $f ]] && cp "$f" "$LOGS/latency-$mode-$(basename "$f")"; done
        python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$LOGS/latency-$mode.json" \
            >>"$TMP/latency.jsonl" 2>/dev/null || echo "{\"mode\": \"$mode\", \"error\": \"latency_replay.py failed\"}" >>"$TMP/latency.jsonl"
        if [[ $mode == replay-w* ]]; then
            KAPPA_TABLE_DB=$LDB "$KAPPA" table status >"$LOGS/latency-table-status.txt" 2>&1 || true
        fi
    done
fi
if grep -q "^$$ " "$LOCK" 2>/dev/null; then rm -f "$LOCK"; fi
HAVE_LOCK=0

# ---------------------------------------------------------------- report
MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then COMMIT+=" (dirty)"; fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
python3 - "$TMP" "$RESULTS/latest.md" "$RESULTS/$STAMP-rows$ROWS.md" "$ROWS" "$RUNS" "$WORKERS" \
    "$(nproc)" "${MODEL:-unknown}" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$COMMIT" "$RATE" <<'PY'
import json, os, sys
tmp, latest, stamped, rows, runs, workers, nproc, model, date, commit, rate = sys.argv[1:]
rows = int(rows)

def runs_of(name):
    try:
        return [tuple(float(x) for x in l.split()) for l in open(os.path.join(tmp, f"{name}.runs")) if l.strip()]
    except OSError:
        return []

def best(name):
    r = runs_of(name)
    return min(r) if r else None

out = [f"# kappa reprocessing benchmark — {rows:,} records\n",
       f"- date: {date}; kappa commit: {commit}",
       f"- machine: {nproc} cores ({model}); `--workers {workers}`, topic `fact` with 2 partitions; "
       f"best of {runs}; warm page cache\n",
       "| step | time (s) | records/s | CPU (s) | max RSS (MiB) | all runs (s) |",
       "|---|---:|---:|---:|---:|---:|"]
labels = [("produce", "`kappa log produce fact --file fact.csv --key key --fsync never`"),
          ("stream_v1", "`kappa stream count-by` v1, `--until-caught-up`"),
          ("reprocess", "`kappa reprocess group-by count,sum:value`: replay + swap"),
          ("batch", "`kappa run group-by count,sum:value` on fact.csv")]
for name, label in labels:
    b = best(name)
    if b is None:
        out.append(f"| {label} | FAILED/absent | | | | |")
        continue
    allr = " ".join(f"{r[0]:.2f}" for r in runs_of(name))
    out.append(f"| {label} | {b[0]:.2f} | {rows / b[0] / 1e6:.2f}M | {b[1]:.1f} | {b[2] / 1024:.0f} | {allr} |")
rp, bt = best("reprocess"), best("batch")
if rp and bt:
    out.append(f"\n**Replay throughput / batch throughput: {bt[0] / rp[0] * 100:.0f}%** (goal ≥ 80%).")
try:
    fb = int(open(os.path.join(tmp, "fact_bytes")).read())
    out.append(f"\nTopic `fact` on disk: {fb / 1e6:.0f} MB.")
except Exception:
    pass
lat = [json.loads(l) for l in open(os.path.join(tmp, "latency.jsonl")) if l.strip()]
if lat:
    out.append(f"\nLatency of the live version (`count-by`, fed at {int(rate):,} records/s), append → visible (ms):\n")
    out.append("| run | ticks | p50 | p90 | p99 | max | replay (s) | replay exit | live stream CPU (s) | ticks not visible |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    f = lambda x: "—" if x is None else f"{x:.0f}"
    for x in lat:
        if "latency_ms_outside_replay" not in x:
            out.append(f"| {x.get('mode')} | FAILED: {x.get('error')} |||||||||")
            continue
        rw = x["replay_cmd"].split("--workers ")[-1].split()[0] if x["replay"] else ""
        for key, label in (("latency_ms_outside_replay", "without replay" if not x["replay"] else f"after the {rw}-worker replay exited"),
                           ("latency_ms_during_replay", f"during a {rw}-worker replay")):
            L = x[key]
            if not L["n"]:
                continue
            out.append(f"| {label} | {L['n']} | {f(L['p50'])} | {f(L['p90'])} | {f(L['p99'])} | {f(L['max'])} | "
                       f"{'' if not x['replay'] else f(x['replay_seconds'])} | {'' if not x['replay'] else x['replay_exit']} | "
                       f"{'—' if x['cpu_s']['live_stream'] is None else format(x['cpu_s']['live_stream'], '.1f')} | {x['ticks_not_visible']} |")
    for x in lat:
        if "latency_ms_outside_replay" in x:
            out.append(f"- {'with' if x['replay'] else 'without'} replay: {x['records_written']:,} records in "
                       f"{x['writer_seconds']:.1f} s, live stream caught up after {f(x['live_catch_up_s'] and x['live_catch_up_s'] * 1000)} ms "
                       f"(epoch 0 rebuilds its state from the log), warm-up {x['warmup_s']:g} s; writer at most "
                       f"{x['writer_max_late_ms']:.0f} ms late; producer ack p50/p99 {f(x['producer_ack_ms']['p50'])}/"
                       f"{f(x['producer_ack_ms']['p99'])} ms; CPU s " + ", ".join(f"{k} {v:.1f}" for k, v in x['cpu_s'].items() if v is not None)
                       + f"; exits {x['exit']}"
                       + (f"; ERROR: {x['error']}" if x.get("error") else ""))
out.append("\nNotes:")
out.append(open(os.path.join(tmp, "notes.txt")).read().strip())
text = "\n".join(out) + "\n"
for p in (latest, stamped):
    open(p, "w", encoding="utf-8").write(text)
print(text)
PY
say "wrote $RESULTS/latest.md"
[[ $(cat "$TMP/status") == ok ]] || exit 1
if grep -q 'FAILED\|DIFFERS' "$TMP/notes.txt"; then exit 1; fi
