#!/usr/bin/env bash
# Nexmark on kappa: every nexmark-qN job over EVENTS pre-generated events,
# as `kappa stream` from the log and as `kappa run` on CSV files, plus bare
# differential dataflow (nexmark_dd) for q0, q1 and q4.
#
#   benches/nexmark/run.sh                    # 10M events (~25 s to generate once, then a few minutes)
#   EVENTS=1000000 benches/nexmark/run.sh     # quick run
#
# 1. Data (once per EVENTS, kept in benches/nexmark/data/, gitignored):
#    `kappa nexmark gen --events EVENTS` into CSV files (data/N/csv) and into
#    topics nexmark-{person,auction,bid} with PARTITIONS partitions (data/N/log).
# 2. For each query: `kappa stream nexmark-qN ... --until-caught-up --quiet`
#    on a fresh table store (SQLite, its writes included), timed from start to
#    exit; `kappa run nexmark-qN` on the CSV files (the output CSV written and
#    fsynced); and for q0, q1, q4 `nexmark_dd` on the same files. Every timed
#    run holds /tmp/kappa-cpu.lock (the machine's CPU lock) and goes through
#    /usr/bin/time for user+sys and peak RSS. Best of RUNS.
# 3. Throughput is EVENTS / wall time, as Flink and Feldera count it (all
#    events of the mixed stream, whichever kinds the query reads), and per
#    core = / WORKERS.
#
# Environment: EVENTS (10000000), WORKERS (2), PARTITIONS (2), RUNS (1),
#   SKIP_BUILD=1 (use the existing target/perf binaries), QUERIES ("0 1 2 3 4 5 7 8 9").
# Output: a markdown table on stdout and in benches/nexmark/results/latest.md,
# raw stderr of every run under benches/nexmark/results/logs/.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
EVENTS=${EVENTS:-10000000}
WORKERS=${WORKERS:-2}
PARTITIONS=${PARTITIONS:-2}
RUNS=${RUNS:-1}
QUERIES=${QUERIES:-0 1 2 3 4 5 7 8 9}
KAPPA=$ROOT/target/perf/kappa
BARE=$ROOT/target/perf/nexmark_dd
DATA=$HERE/data/$EVENTS
WORK=$HERE/work
RESULTS=$HERE/results
LOGS=$RESULTS/logs
LOCK=/tmp/kappa-cpu.lock
mkdir -p "$LOGS" "$WORK"
BENCH_TMP=$(mktemp -d /tmp/kappa-nexmark.XXXXXX)
trap 'rm -rf "$BENCH_TMP"' EXIT
CPU_LOCK=$LOCK
. "$ROOT/benches/lib.sh"   # say, bench (best of RUNS, under the CPU lock), best, ratio

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf --features bench-tools"
    (cd "$ROOT" && flock "$LOCK" cargo build --profile perf --features bench-tools --bin kappa --bin nexmark_dd)
fi

# ---------------------------------------------------------------- data
# The marker names the log's row encoding: data made before binary rows
# (an empty marker) is made again, so the stream figures read what a
# producer writes today.
if [[ "$(cat "$DATA/done" 2>/dev/null)" != rows-v1 ]]; then
    say "generating $EVENTS events into $DATA"
    rm -rf "$DATA"; mkdir -p "$DATA"
    flock "$LOCK" "$KAPPA" nexmark gen --events "$EVENTS" --output "$DATA/csv"
    flock "$LOCK" "$KAPPA" nexmark gen --events "$EVENTS" --log-dir "$DATA/log" --partitions "$PARTITIONS"
    echo rows-v1 > "$DATA/done"
fi

inputs() { # the inputs of query $1
    case $1 in 3|8) echo "person auction" ;; 4|9) echo "auction bid" ;; *) echo "bid" ;; esac
}

cat "$DATA"/csv/*.csv >/dev/null # warm the page cache
for q in $QUERIES; do
    say "q$q"
    run_args=() stream_args=()
    for i in $(inputs "$q"); do
        run_args+=(-i "$i=$DATA/csv/$i.csv")
        stream_args+=(-i "$i=nexmark-$i")
    done
    PRE='rm -rf "$WORK/out" "$WORK"/tables.db*'
    PRE=$PRE bench "q$q-stream" "$KAPPA" stream "nexmark-q$q" "${stream_args[@]}" --until-caught-up --quiet \
        --workers "$WORKERS" --log-dir "$DATA/log" --table-db "$WORK/tables.db"
    PRE=$PRE bench "q$q-batch" "$KAPPA" run "nexmark-q$q" "${run_args[@]}" -o "$WORK/out" --workers "$WORKERS"
    case $q in 0|1|4) bench "q$q-dd" "$BARE" "q$q" "$DATA/csv" "$WORKERS" ;; esac
done

# ---------------------------------------------------------------- report
# Published per-core figures (Flink 1.13: nexmark repository README; Feldera: its 16-core table);
# for q0-q3 the sources are quoted as a range.
declare -A FLINK=([0]=150-175 [1]=150-175 [2]=150-175 [3]=150-175 [4]=34 [5]=22 [7]=12 [8]=146 [9]=14)
declare -A FELDERA=([0]=410-436 [1]=410-436 [2]=410-436 [3]=410-436 [4]=265 [5]=412 [7]=196 [8]=415 [9]=57)
# Feldera's own DBSP nexmark bench built and run on this machine (commit 5c7931d, dbsp 0.337.0,
# --cpu-cores 2, 10M events, K events/s per core; issue 13): the figures kappa run must reach.
declare -A FELDERA_HERE=([0]=607 [1]=421 [4]=362 [5]=470 [7]=387 [9]=125)
# best3 NAME: "wall cpu MiB" of NAME's best run
best3() { best "$1" | awk '{ printf "%s %.1f %d\n", $1, $2, $3 / 1024 }'; }
rate() { awk -v n="$EVENTS" -v t="$1" -v w="${2:-1}" 'BEGIN { printf "%.0f", n / t / w / 1000 }'; }
{
    echo "Nexmark, $EVENTS events, $WORKERS workers, $(date -u +%F), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo
    echo "| query | records read | kappa stream: wall s (CPU s), K events/s, **K/core**, peak RSS | kappa batch: wall s (CPU s), K events/s, **K/core**, peak RSS | bare dd: wall s (CPU s), K/core; kappa batch / dd | Feldera on this machine K/core; kappa batch / Feldera | Flink 1.13 K/core (published) | Feldera K/core (published) |"
    echo "|---|---|---|---|---|---|---|---|"
    for q in $QUERIES; do
        read -r st scpu srss < <(best3 "q$q-stream")
        read -r bt bcpu brss < <(best3 "q$q-batch")
        recs=$(grep -o 'rows in ([^)]*)' "$LOGS/q$q-batch.stderr" | head -1 | sed 's/rows in //')
        dd="—"
        if [[ $q =~ ^(0|1|4)$ ]] && [[ -n $(best "q$q-dd") ]]; then
            read -r dt dcpu _ < <(best3 "q$q-dd")
            dd="$dt s ($dcpu), $(rate "$dt" "$WORKERS"); $(ratio "$bt" "$dt")"
        fi
        here="—"
        if [[ -n ${FELDERA_HERE[$q]:-} ]]; then
            here="${FELDERA_HERE[$q]}; $(ratio "$(rate "$bt" "$WORKERS")" "${FELDERA_HERE[$q]}")"
        fi
        echo "| q$q | $recs | $st s ($scpu), $(rate "$st"), **$(rate "$st" "$WORKERS")**, $srss MiB | $bt s ($bcpu), $(rate "$bt"), **$(rate "$bt" "$WORKERS")**, $brss MiB | $dd | $here | ${FLINK[$q]} | ${FELDERA[$q]} |"
    done
} | tee "$RESULTS/latest.md"
