#!/usr/bin/env bash
# kappa streaming benchmark: `kappa stream` over the retained log against
# `kappa run` on the same data as files, and append-to-visible latency.
#
#   benches/stream/run.sh                  # full run (~3 minutes on 2 vCPUs)
#   ROWS=200000 LAT_SECS=5 RUNS=1 benches/stream/run.sh   # quick smoke run
#
# 1. Throughput. ROWS `key,value` rows (benches/batch/gen_data.py: 100k uniform
#    keys) are produced into topic `fact` (2 partitions, --key key; default
#    --fsync batch, and once more with --fsync never into a scratch topic for
#    the produce rate), the 100k-row dimension into `dim`. Then, for each job,
#    `kappa stream JOB ... --until-caught-up --quiet` on a fresh table store is
#    timed from start to exit, and `kappa run` of the same job on the same data
#    as files; best of RUNS. Every stream table is checked against the batch
#    output (same rows and counts). `count-by` and `group-by` run once more
#    with --max-batch BIG_BATCH (one epoch per worker). The join's floors:
#    SQLite alone inserting the join's output rows in one statement, and in
#    as many commits as the stream made; and the batch join that indexes
#    both sides (strategy=shuffle), as a stream must.
# 2. Latency (latency.py). `kappa stream` runs in the background while a
#    producer appends ticks of rows at a fixed RATE (records/s) and a poller
#    reads the output view every few ms; p50/p99/max of append -> visible.
#
# Environment:
#   ROWS=N         rows in fact.csv (default 2000000)
#   RUNS=N         timed runs per throughput measurement, best reported (default 2)
#   WORKERS=N      --workers (default 2); topics have PARTITIONS=2 partitions
#   BIG_BATCH=N    --max-batch of the extra count-by and group-by stream runs (default 1000000)
#   LAT_RUNS="W:R .." latency runs, workload:records/s (workloads in latency.py;
#                  default "ticks:50000 groupby:50000 groupby:20000 groupby:10000")
#   LAT_SECS=S     measured seconds per latency run (default 20, plus 3 s warm-up)
#   SKIP_BUILD=1   do not run `cargo build --profile perf`
#   SKIP_THROUGHPUT=1 / SKIP_LATENCY=1   run only one part
#   LOCK_WAIT=S    wait at most S seconds for /tmp/kappa-bench.lock (default 900)
#   QUIET_WAIT=S   first wait up to S seconds (default 300) for the 1-minute load average
#                  to drop below QUIET_LOAD (default 0.8): builds do not take the lock
#   KAPPA=         binary to time (default target/perf/kappa)
#
# Data goes to benches/stream/data/rows-N/, scratch logs and table stores to
# benches/stream/work/ (wiped), the report to stdout, benches/stream/results/latest.md
# and a timestamped copy; raw timings and stderr under benches/stream/results/logs/.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-2000000}
RUNS=${RUNS:-2}
WORKERS=${WORKERS:-2}
BIG_BATCH=${BIG_BATCH:-1000000}
PARTITIONS=${PARTITIONS:-2}
LAT_RUNS=${LAT_RUNS:-ticks:50000 groupby:50000 groupby:20000 groupby:10000}
LAT_SECS=${LAT_SECS:-20}
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
DATA=$HERE/data/rows-$ROWS
WORK=$HERE/work
RESULTS=$HERE/results
LOGS=$RESULTS/logs
LOCK=/tmp/kappa-bench.lock
mkdir -p "$RESULTS" "$LOGS"
TMP=$(mktemp -d /tmp/kappa-stream-bench.XXXXXX)
HAVE_LOCK=0
cleanup() {
    if ((HAVE_LOCK)); then rm -f "$LOCK"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"   # say, timed, bench, record (results.tsv)

# ---------------------------------------------------------------- build
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf"
    (cd "$ROOT" && cargo build --profile perf)
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found (build failed or SKIP_BUILD=1 without a build)" >&2; exit 1; }
"$KAPPA" stream --help >/dev/null 2>&1 || { echo "error: $KAPPA has no 'stream' command" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "error: sqlite3 (the CLI) is needed to check the tables" >&2; exit 1; }

# ---------------------------------------------------------------- data
say "generating data (ROWS=$ROWS) into $DATA"
python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS" --jobs 1
FACT=$DATA/fact.csv DIM=$DATA/dim.csv
cat "$FACT" "$DIM" >/dev/null   # warm the page cache

# ---------------------------------------------------------------- quiet
# Builds do not take the lock: wait (up to QUIET_WAIT s) for the machine to be idle-ish.
quiet_s=${QUIET_WAIT:-300}
while awk -v max="${QUIET_LOAD:-0.8}" '{ exit !($1 > max) }' /proc/loadavg && ((quiet_s > 0)); do
    ((quiet_s % 60 == 0)) && say "waiting for a quieter machine (load average $(cut -d' ' -f1 /proc/loadavg))"
    sleep 5
    quiet_s=$((quiet_s - 5))
done

# ---------------------------------------------------------------- lock
# Timings are only taken while holding the shared benchmark lock.
wait_s=${LOCK_WAIT:-900}
while ! (set -o noclobber; echo "$$ benches/stream/run.sh $(date -u +%FT%TZ)" >"$LOCK") 2>/dev/null; do
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

# ---------------------------------------------------------------- timing
echo "- load average when the timings started: $(cut -d' ' -f1-3 /proc/loadavg) (other builds on the machine inflate every figure)" >"$TMP/notes.txt"
note() { printf '%s\n' "$*" >>"$TMP/notes.txt"; }

LOG_DIR=$WORK/log
DB=$WORK/tables.db
export KAPPA_LOG_DIR=$LOG_DIR KAPPA_TABLE_DB=$DB
fresh_db() { rm -f "$DB" "$DB-wal" "$DB-shm"; }

# sql QUERY: one query on the table store, CSV without header
sql() { sqlite3 -batch -csv "$DB" "$1"; }

# check_table NAME VIEW COLUMNS BATCH_CSV: the stream table equals the batch output
# (the view lists bag rows once with kappa_count, so expand by it before comparing)
check_table() {
    local name=$1 view=$2 cols=$3 csv=$4 bag
    bag=$(sql "SELECT count(*) FROM pragma_table_info('$view') WHERE name = 'kappa_count'")
    local q="SELECT $cols FROM \"$view\""
    if [[ $bag == 1 ]]; then
        q="WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < (SELECT max(kappa_count) FROM \"$view\")) \
           SELECT $cols FROM \"$view\" JOIN r ON r.n <= kappa_count"
    fi
    sql "$q" | sort >"$TMP/$name.stream.csv"
    tail -n +2 "$csv" | sort >"$TMP/$name.batch.csv"
    if cmp -s "$TMP/$name.stream.csv" "$TMP/$name.batch.csv"; then
        note "- $name: stream table identical to the batch output ($(wc -l <"$TMP/$name.batch.csv") rows)"
    else
        note "- **$name: stream table DIFFERS from the batch output** (stream $(wc -l <"$TMP/$name.stream.csv") rows, batch $(wc -l <"$TMP/$name.batch.csv") rows; diff in results/logs/$name.diff)"
        diff "$TMP/$name.stream.csv" "$TMP/$name.batch.csv" | head -n 50 >"$LOGS/$name.diff" || true
    fi
}

if [[ ${SKIP_THROUGHPUT:-0} != 1 ]]; then
    # ------------------------------------------------------------ produce
    rm -rf "$WORK"; mkdir -p "$WORK"
    "$KAPPA" log create fact --partitions "$PARTITIONS" >/dev/null
    "$KAPPA" log create dim --partitions "$PARTITIONS" >/dev/null
    "$KAPPA" log create fact_nofsync --partitions "$PARTITIONS" >/dev/null
    say "producing $FACT into topic fact (--key key, --fsync batch)"
    timed produce_fact "$KAPPA" log produce fact --file "$FACT" --key key && record produce_fact ok || record produce_fact FAILED
    say "producing $FACT into topic fact_nofsync (--key key, --fsync never)"
    timed produce_fact_nofsync "$KAPPA" log produce fact_nofsync --file "$FACT" --key key --fsync never \
        && record produce_fact_nofsync ok || record produce_fact_nofsync FAILED
    rm -rf "$LOG_DIR/fact_nofsync"
    timed produce_dim "$KAPPA" log produce dim --file "$DIM" --key key && record produce_dim ok || record produce_dim FAILED
    du -sb "$LOG_DIR/fact" | awk '{ print $1 }' >"$TMP/fact_bytes"

    # ------------------------------------------------------------ jobs
    OUT=$WORK/out
    # job NAME STREAM_ARGS... -- BATCH_ARGS...
    STREAM_COMMON=(--workers "$WORKERS" --until-caught-up --quiet)
    PRE=fresh_db bench stream_count "$KAPPA" stream count-by --input input=fact --param key=key "${STREAM_COMMON[@]}"
    sql "SELECT epochs, records_applied FROM kappa_deployments" >"$TMP/stream_count.catalog" || true
    bench batch_count "$KAPPA" run count-by --input "input=$FACT" --param key=key \
        --output "$OUT/count" --overwrite --workers "$WORKERS"
    check_table count counts 'key, count' "$OUT/count/counts.csv"
    # The same stream with 10x larger epochs: how much of the stream's time is per-epoch table work.
    PRE=fresh_db bench stream_count_big "$KAPPA" stream count-by --input input=fact --param key=key \
        --max-batch "$BIG_BATCH" "${STREAM_COMMON[@]}"
    sql "SELECT epochs, records_applied FROM kappa_deployments" >"$TMP/stream_count_big.catalog" || true

    PRE=fresh_db bench stream_groupby "$KAPPA" stream group-by --input input=fact --param key=key \
        --param agg=count,sum:value "${STREAM_COMMON[@]}"
    sql "SELECT epochs, records_applied FROM kappa_deployments" >"$TMP/stream_groupby.catalog" || true
    bench batch_groupby "$KAPPA" run group-by --input "input=$FACT" --param key=key --param agg=count,sum:value \
        --output "$OUT/groupby" --overwrite --workers "$WORKERS"
    check_table groupby groups 'key, count, sum_value' "$OUT/groupby/groups.csv"
    # One epoch per worker: what the epoch sizer's first, small epoch costs a backlog.
    PRE=fresh_db bench stream_groupby_big "$KAPPA" stream group-by --input input=fact --param key=key \
        --param agg=count,sum:value --max-batch "$BIG_BATCH" "${STREAM_COMMON[@]}"
    sql "SELECT epochs, records_applied FROM kappa_deployments" >"$TMP/stream_groupby_big.catalog" || true

    PRE=fresh_db bench stream_join "$KAPPA" stream join --input left=fact --input right=dim \
        --param on=key=key --param kind=inner "${STREAM_COMMON[@]}"
    sql "SELECT epochs, records_applied FROM kappa_deployments" >"$TMP/stream_join.catalog" || true
    bench batch_join "$KAPPA" run join --input "left=$FACT" --input "right=$DIM" --param on=key=key --param kind=inner \
        --output "$OUT/join" --overwrite --workers "$WORKERS"
    check_table join joined 'key, value, attr' "$OUT/join/joined.csv"
    du -sb "$DB" "$DB-wal" 2>/dev/null | awk '{ s += $1 } END { print s }' >"$TMP/join_db_bytes" || true
    # The single writer's floor for the join's output: SQLite alone inserting its
    # distinct rows (with their counts, in key order) from one INSERT ... SELECT,
    # into a table shaped as kappa's, in one transaction. Staged untimed.
    STAGE=$WORK/floor-stage.db FLOOR_DB=$WORK/floor.db
    rm -f "$STAGE"
    sqlite3 -batch "$STAGE" ".mode csv" ".import '$OUT/join/joined.csv' imported" \
        "CREATE TABLE rows AS SELECT CAST(key AS INTEGER) AS k, CAST(value AS INTEGER) AS v, attr AS a,
             count(*) AS n FROM imported GROUP BY 1, 2, 3 ORDER BY 1, 2, 3" "DROP TABLE imported"
    sqlite3 -batch "$STAGE" "SELECT count(*) FROM rows" >"$TMP/floor_rows"
    floor_fresh() { rm -f "$FLOOR_DB" "$FLOOR_DB-wal" "$FLOOR_DB-shm"; }
    PRE=floor_fresh bench sqlite_join_floor sqlite3 -batch "$FLOOR_DB" "PRAGMA journal_mode = wal" \
        "CREATE TABLE t (key, value, attr, kappa_mask INTEGER NOT NULL,
             kappa_n INTEGER NOT NULL CHECK (kappa_n > 0),
             PRIMARY KEY (key, value, attr, kappa_mask)) WITHOUT ROWID" \
        "ATTACH '$STAGE' AS s" "BEGIN" "INSERT INTO t SELECT k, v, a, 0, n FROM s.rows" "COMMIT"
    # The same rows in as many commits as the stream made (its catalog's
    # `epochs`): each commit a uniform random share of the rows, in key
    # order, as a stream's epochs are offset ranges of a topic whose keys
    # are spread over the whole table. A live version commits at least once
    # a second (HOLD_LIVE in runner/commit.rs), so a catch-up that takes
    # seconds makes several commits, each touching most of the table's pages.
    COMMITS=$(cut -d, -f1 "$TMP/stream_join.catalog" | tail -n 1)
    if [[ $COMMITS =~ ^[0-9]+$ ]] && ((COMMITS > 0)); then
        echo "$COMMITS" >"$TMP/floor_commits"
        sqlite3 -batch "$STAGE" "ALTER TABLE rows ADD COLUMN e" "UPDATE rows SET e = abs(random()) % $COMMITS" \
            "CREATE INDEX rows_e ON rows (e, k, v, a)"
        EPOCH_SQL=()
        for ((e = 0; e < COMMITS; e++)); do
            EPOCH_SQL+=("BEGIN" "INSERT INTO t SELECT k, v, a, 0, n FROM s.rows WHERE e = $e ORDER BY k, v, a" "COMMIT")
        done
        PRE=floor_fresh bench sqlite_join_in_commits sqlite3 -batch "$FLOOR_DB" "PRAGMA journal_mode = wal" \
            "PRAGMA cache_size = -16384" \
            "CREATE TABLE t (key, value, attr, kappa_mask INTEGER NOT NULL,
                 kappa_n INTEGER NOT NULL CHECK (kappa_n > 0),
                 PRIMARY KEY (key, value, attr, kappa_mask)) WITHOUT ROWID" \
            "ATTACH '$STAGE' AS s" "${EPOCH_SQL[@]}"
    fi
    rm -f "$STAGE" "$FLOOR_DB" "$FLOOR_DB-wal" "$FLOOR_DB-shm"
    # A stream must index both sides of a join (a right row that comes
    # later meets every earlier left row); a batch join picks broadcast
    # and streams the big side through a hash table of the small one.
    # The batch join that indexes both sides, as the stream does:
    bench batch_join_shuffle "$KAPPA" run join --input "left=$FACT" --input "right=$DIM" --param on=key=key \
        --param kind=inner --param strategy=shuffle --output "$OUT/join-shuffle" --overwrite --workers "$WORKERS"
    cmp -s "$OUT/join/joined.csv" "$OUT/join-shuffle/joined.csv" \
        || note "- join: strategy=shuffle output DIFFERS from strategy=auto"
    rm -rf "$OUT"
fi

# ---------------------------------------------------------------- latency
: >"$TMP/latency.jsonl"
if [[ ${SKIP_LATENCY:-0} != 1 ]]; then
    # The commit of every epoch fsyncs SQLite's WAL: how long one small fsync takes right now.
    mkdir -p "$WORK"
    python3 - "$WORK/fsync-probe" >>"$TMP/notes.txt" <<'PY'
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block, xs = b"x" * 4096, []
for _ in range(100):
    os.write(fd, block)
    t = time.perf_counter()
    os.fsync(fd)
    xs.append((time.perf_counter() - t) * 1000)
os.close(fd)
os.unlink(path)
xs.sort()
print(f"- disk right before the latency runs: append 4 KiB + fsync, 100 times: p50 {xs[49]:.1f} ms, "
      f"p99 {xs[98]:.1f} ms, max {xs[99]:.1f} ms; load average {open('/proc/loadavg').read().split()[0]}")
PY
    for run in $LAT_RUNS; do
        workload=${run%%:*} rate=${run#*:}
        say "latency: $workload at $rate records/s for ${LAT_SECS}s"
        if python3 "$HERE/latency.py" --kappa "$KAPPA" --work "$WORK/latency" --workload "$workload" \
            --rate "$rate" --seconds "$LAT_SECS" --workers "$WORKERS" --partitions "$PARTITIONS" \
            >"$LOGS/latency-$workload-$rate.json" 2>"$LOGS/latency-$workload-$rate.stderr"; then :
        else
            echo "   latency run $workload at $rate reported a problem (see $LOGS/latency-$workload-$rate.*)" >&2
        fi
        cp "$WORK/latency/stream.stderr" "$LOGS/latency-$workload-$rate.stream.stderr" 2>/dev/null || true
        python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
            "$LOGS/latency-$workload-$rate.json" >>"$TMP/latency.jsonl" 2>/dev/null \
            || echo "{\"workload\": \"$workload\", \"rate_target\": $rate, \"error\": \"latency.py failed\"}" >>"$TMP/latency.jsonl"
    done
fi
rm -f "$LOCK"; HAVE_LOCK=0

# ---------------------------------------------------------------- report
MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
MEM_KB=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then COMMIT+=" (dirty)"; fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
[[ -f $TMP/floor_rows ]] || echo 0 >"$TMP/floor_rows"
for f in stream_count stream_count_big stream_groupby stream_groupby_big stream_join; do [[ -f $TMP/$f.catalog ]] || : >"$TMP/$f.catalog"; done
[[ -f $TMP/fact_bytes ]] || echo 0 >"$TMP/fact_bytes"
[[ -f $TMP/join_db_bytes ]] || echo 0 >"$TMP/join_db_bytes"

python3 - "$TMP" "$RESULTS/latest.md" "$RESULTS/$STAMP-rows$ROWS.md" "$ROWS" "$RUNS" "$WORKERS" "$PARTITIONS" \
    "$(nproc)" "${MODEL:-unknown}" "$MEM_KB" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$COMMIT" "$BIG_BATCH" <<'PY'
import json, os, sys

(tmp, latest, stamped, rows, runs, workers, parts, nproc, model, mem_kb, date, commit, big) = sys.argv[1:]
big = int(big)
rows = int(rows)
DIM_ROWS = 100_000
r = {}
for line in open(os.path.join(tmp, "results.tsv")):
    name, best, all_t, cpu, rss, status = line.rstrip("\n").split("\t")
    r[name] = dict(best=float(best) if best else None, all=all_t, cpu=float(cpu) if cpu else None,
                   rss=int(rss) if rss else None, status=status)

def t(name):
    x = r.get(name) or {}
    return x.get("best")

def fmt_s(x):
    return "—" if x is None else f"{x:.2f}"

def rate(n, secs):
    return "—" if not secs else f"{n / secs / 1e3:,.0f}k"

def catalog(name):
    try:
        line = open(os.path.join(tmp, f"{name}.catalog")).read().strip().splitlines()[-1]
        epochs, applied = line.split(",")
        return epochs
    except Exception:
        return "—"

out = []
out.append(f"# kappa streaming benchmark — {rows:,} fact rows\n")
out.append(f"- date: {date}; kappa commit: {commit}")
out.append(f"- machine: {nproc} cores ({model}), {int(mem_kb) / 1048576:.1f} GiB RAM")
out.append(f"- `--workers {workers}`, topics with {parts} partitions (`--key key`), default epochs "
           f"(`--max-latency-ms 100 --max-batch 100000`); best of {runs} runs; warm page cache\n")
if "produce_fact" in r:
    fb = int(open(os.path.join(tmp, "fact_bytes")).read().strip() or 0)
    out.append("| produce (`kappa log produce --file fact.csv --key key`) | time (s) | records/s |")
    out.append("|---|---:|---:|")
    out.append(f"| `--fsync batch` (default) | {fmt_s(t('produce_fact'))} | {rate(rows, t('produce_fact'))} |")
    out.append(f"| `--fsync never` | {fmt_s(t('produce_fact_nofsync'))} | {rate(rows, t('produce_fact_nofsync'))} |")
    out.append(f"| dim.csv (100k rows, `--fsync batch`) | {fmt_s(t('produce_dim'))} | {rate(DIM_ROWS, t('produce_dim'))} |")
    out.append(f"\nTopic `fact` on disk: {fb / 1e6:.0f} MB for {rows:,} records.\n")
    out.append("| job | records in | stream (s) | stream records/s | batch `kappa run` (s) | batch records/s | stream / batch | stream CPU (s) | stream max RSS (MiB) | epochs |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, key, n in [("`count-by key=key`", "count", rows),
                          (f"`count-by key=key`, `--max-batch {big}`", "count_big", rows),
                          ("`group-by key=key agg=count,sum:value`", "groupby", rows),
                          (f"`group-by key=key agg=count,sum:value`, `--max-batch {big}`", "groupby_big", rows),
                          ("`join` fact ⋈ dim on key, inner", "join", rows + DIM_ROWS)]:
        s, b = t(f"stream_{key}"), t(f"batch_{key.removesuffix('_big')}")
        ratio = "—" if not s or not b else f"{s / b:.2f}×"
        sr = r.get(f"stream_{key}", {})
        cpu = "—" if sr.get("cpu") is None else f"{sr['cpu']:.1f}"
        rss = "—" if sr.get("rss") is None else f"{sr['rss'] / 1024:.0f}"
        if sr.get("status") == "FAILED":
            s_txt = "FAILED"
        else:
            s_txt = fmt_s(s)
        b_txt = "FAILED" if (r.get(f"batch_{key.removesuffix('_big')}") or {}).get("status") == "FAILED" else fmt_s(b)
        out.append(f"| {label} | {n:,} | {s_txt} | {rate(n, s)} | {b_txt} | {rate(n, b)} | {ratio} | {cpu} | {rss} | {catalog('stream_' + key)} |")
    out.append("")
    floor, sj = t("sqlite_join_floor"), t("stream_join")
    floor_rows = int(open(os.path.join(tmp, "floor_rows")).read().strip() or 0)
    if floor:
        ratio = "—" if not sj else f"{sj / floor:.2f}×"
        out.append(f"The single writer's floor for the join's output: SQLite alone inserts its {floor_rows:,} "
                   f"distinct rows from one `INSERT ... SELECT` into a table shaped as kappa's, in one "
                   f"transaction, in {fmt_s(floor)} s on one core (stream join / floor: {ratio}).\n")
    ef = t("sqlite_join_in_commits")
    if ef and os.path.exists(os.path.join(tmp, "floor_commits")):
        commits = open(os.path.join(tmp, "floor_commits")).read().strip()
        efr = r.get("sqlite_join_in_commits", {})
        cpu = "—" if efr.get("cpu") is None else f"{efr['cpu']:.2f}"
        out.append(f"SQLite alone, the same rows in the {commits} commits the stream made (each a uniform "
                   f"random share of the rows, in key order; the stream's first commits are smaller): "
                   f"{fmt_s(ef)} s, {cpu} s CPU (stream join / this: "
                   f"{'—' if not sj else f'{sj / ef:.2f}×'}).\n")
    bs = t("batch_join_shuffle")
    if bs:
        bsr = r.get("batch_join_shuffle", {})
        cpu = "—" if bsr.get("cpu") is None else f"{bsr['cpu']:.1f}"
        out.append(f"The batch join with `strategy=shuffle`, which indexes both sides as a stream must: "
                   f"{fmt_s(bs)} s, {cpu} s CPU (stream join / this: {'—' if not sj else f'{sj / bs:.2f}×'}).\n")

lat = [json.loads(l) for l in open(os.path.join(tmp, "latency.jsonl")) if l.strip()]
if lat:
    out.append("Latency, append → committed and visible in the table (ms; the writer's timestamp to the "
               "poller's first sight):\n")
    out.append("| workload | target rate | achieved | p50 | p90 | p99 | max | producer ack p50 / p99 | epochs | CPU s (stream / produce / writer / poller) | ticks not visible |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    def f(x):
        return "—" if x is None else f"{x:.0f}"
    for x in lat:
        if x.get("error") and "latency_ms" not in x:
            out.append(f"| {x.get('workload')} | {x.get('rate_target')} | FAILED: {x['error']} ||||||||")
            continue
        L, A, C = x["latency_ms"], x["producer_ack_ms"], x["cpu_s"]
        cpu = " / ".join("—" if C.get(k) is None else f"{C[k]:.1f}" for k in ("stream", "produce", "writer", "poller"))
        out.append(f"| {x['workload']} (`{x['job']}`) | {x['rate_target']:,} | {x['rate_achieved']:,} | {f(L['p50'])} | "
                   f"{f(L['p90'])} | {f(L['p99'])} | {f(L['max'])} | {A['p50']:.1f} / {A['p99']:.1f} | "
                   f"{x['catalog'].get('epochs', '—')} | {cpu} | {x['ticks_not_visible']} |")
    out.append("")
    for x in lat:
        if "latency_ms" in x:
            out.append(f"- {x['workload']}: {x['rows_per_tick']} records every {x['tick_ms']:g} ms "
                       f"({x['records_per_append']} per append), {x['seconds']:g} s measured after "
                       f"{x['warmup_s']:g} s warm-up, poll every {x['poll_ms']:g} ms (mean query "
                       f"{x['poller']['query_ms_mean']:.2f} ms); writer at most {x['writer_max_late_ms']:.0f} ms "
                       f"behind schedule; last tick visible {f(x['drain_after_last_write_ms'])} ms after it was written; "
                       f"exit codes stream {x['exit']['stream']}, produce {x['exit']['produce']}"
                       + (f"; ERROR: {x['error']}" if x.get("error") else ""))
            prog = [l for l in x.get("stream_stderr_tail", []) if "epoch latency" in l]
            if prog:
                out.append(f"  - last progress line of `kappa stream`: `{prog[-1]}`")
    out.append("")

notes = open(os.path.join(tmp, "notes.txt")).read().strip()
out.append("Notes:")
if notes:
    out.append(notes)
for name, x in r.items():
    if x["status"] == "FAILED":
        out.append(f"- {name} FAILED (see benches/stream/results/logs/{name}.stderr)")
    elif x["all"]:
        out.append(f"- {name} runs: {x['all']} s")
text = "\n".join(out) + "\n"
for path in (latest, stamped):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
print(text)
PY
say "wrote $RESULTS/latest.md"
if grep -q $'\tFAILED$' "$TMP/results.tsv" || grep -q 'DIFFERS' "$TMP/notes.txt"; then
    echo "error: some runs failed or disagreed with the batch output (see $LOGS/)" >&2
    exit 1
fi
