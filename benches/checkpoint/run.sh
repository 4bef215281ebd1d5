#!/usr/bin/env bash
# kappa checkpoint benchmark: what a restart costs as history grows, with the
# deployment's state checkpointed (the default) and without (--checkpoint-interval
# off: the restart replays the log), and what checkpointing costs a catch-up.
#
#   benches/checkpoint/run.sh                        # SIZES="1000000 4000000"
#   SIZES="1000000 4000000 16000000" benches/checkpoint/run.sh
#
# For each size N: N `key,value` rows (benches/batch/gen_data.py: 100k uniform
# keys, values uniform over 0..999999) are produced into topic `ev` (2
# partitions). For each job, two deployments catch up on fresh table stores,
# timed: one with checkpoints, one without. Then, RUNS times, NEW more rows
# are produced and each deployment restarts to apply them (`--until-caught-up`),
# timed. The tables of the two deployments are compared after every restart.
# The jobs:
#   count-by key     the input collection is the key column: its state is at
#                    most 100k distinct keys with their counts, whatever N is.
#   group-by key     count and sum of value: the state holds every distinct
#                    (key, value) row, so it grows with N (no operator-level cut yet).
#
# Environment:
#   SIZES="N .."   history sizes (default "1000000 4000000")
#   NEW=N          rows applied by each timed restart (default 1000)
#   RUNS=N         timed restarts per deployment (default 3)
#   WORKERS=N      --workers (default 2)
#   KAPPA=         binary to time (default target/release/kappa: what
#                  `cargo install --path .` builds)
#   SKIP_BUILD=1   do not run `cargo build --release`
#
# The report goes to stdout and benches/checkpoint/results/latest.md; each
# run's stdout/stderr under benches/checkpoint/results/logs/.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SIZES=${SIZES:-1000000 4000000}
NEW=${NEW:-1000}
RESTARTS=${RUNS:-3}
WORKERS=${WORKERS:-2}
KAPPA=${KAPPA:-$ROOT/target/release/kappa}
RESULTS=$HERE/results
LOGS=$RESULTS/logs
WORK=$HERE/work
TMP=$(mktemp -d /tmp/kappa-checkpoint-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$RESULTS" "$LOGS"

BENCH_TMP=$TMP
RUNS=1
. "$ROOT/benches/lib.sh"   # say, timed, best

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --release"
    (cd "$ROOT" && cargo build --release)
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found" >&2; exit 1; }

# The last wall time of NAME's runs.
wall() { tail -n 1 "$TMP/$1.runs" | cut -d' ' -f1; }
# The median wall time of NAME's runs.
median() { cut -d' ' -f1 "$TMP/$1.runs" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# The peak RSS (MiB) of NAME's last run.
rss() { tail -n 1 "$TMP/$1.runs" | awk '{ printf "%d", $3 / 1024 }'; }

job_args() {
    case $1 in
        count-by) echo "count-by -p key=key" ;;
        group-by) echo "group-by -p key=key -p agg=count,sum:value" ;;
    esac
}
output_of() {
    case $1 in
        count-by) echo counts ;;
        group-by) echo groups ;;
    esac
}

REPORT=$TMP/report.md
{
    echo "## Checkpoint benchmark ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(commit_id "$ROOT"))"
    echo
    echo "Machine: $(machine). Binary: $KAPPA. $WORKERS workers; restarts apply $NEW new rows; median of $RESTARTS restarts."
    echo
    echo "| job | history | catch-up, checkpoints | catch-up, off | restart, checkpoints | restart, off (replay) | off / checkpoints | checkpoint size |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|"
} >"$REPORT"

for n in $SIZES; do
    data=$ROOT/benches/batch/data/rows-$n
    say "data: $n rows in $data"
    python3 "$ROOT/benches/batch/gen_data.py" "$data" --rows "$n" >&2
    rm -rf "$WORK" && mkdir -p "$WORK"
    log=$WORK/log
    "$KAPPA" log create ev --partitions 2 --log-dir "$log" >/dev/null
    "$KAPPA" log produce ev --file "$data/fact.csv" --log-dir "$log" --fsync never >/dev/null 2>&1
    for job in count-by group-by; do
        read -r -a args <<<"$(job_args "$job")"
        common=(stream "${args[@]}" -i input=ev --log-dir "$log" --workers "$WORKERS" --until-caught-up --quiet)
        on=(--table-db "$WORK/$job-on.db")
        off=(--table-db "$WORK/$job-off.db" --checkpoint-interval off)
        timed "$job-$n-catchup-on" "$KAPPA" "${common[@]}" "${on[@]}"
        timed "$job-$n-catchup-off" "$KAPPA" "${common[@]}" "${off[@]}"
        for ((i = 1; i <= RESTARTS; i++)); do
            head -n 1 "$data/fact.csv" >"$TMP/new.csv"
            python3 -c "
import random, sys
r = random.Random($i * 7919 + $n)
for _ in range($NEW): print(f'{r.randrange(100000)},{r.randrange(1000000)}')" >>"$TMP/new.csv"
            "$KAPPA" log produce ev --file "$TMP/new.csv" --log-dir "$log" >/dev/null 2>&1
            timed "$job-$n-restart-on" "$KAPPA" "${common[@]}" "${on[@]}"
            timed "$job-$n-restart-off" "$KAPPA" "${common[@]}" "${off[@]}"
            out=$(output_of "$job")
            if ! cmp -s <("$KAPPA" table show "$out" --csv --limit 1000000000 --table-db "$WORK/$job-on.db" 2>/dev/null) \
                <("$KAPPA" table show "$out" --csv --limit 1000000000 --table-db "$WORK/$job-off.db" 2>/dev/null); then
                echo "error: $job at $n rows: the checkpointed table differs from the replayed one" >&2
                exit 1
            fi
        done
        size=$("$KAPPA" table status --table-db "$WORK/$job-on.db" |
            awk 'NR == 1 { c = index($0, "CHECKPOINT"); e = index($0, "CREATED") } NR == 2 { s = substr($0, c, e - c); sub(/ +$/, "", s); print s }')
        on_s=$(median "$job-$n-restart-on")
        off_s=$(median "$job-$n-restart-off")
        printf '| %s | %s | %s s, %s MiB | %s s, %s MiB | %s s, %s MiB | %s s, %s MiB | %s | %s |\n' \
            "$job" "$n" \
            "$(wall "$job-$n-catchup-on")" "$(rss "$job-$n-catchup-on")" \
            "$(wall "$job-$n-catchup-off")" "$(rss "$job-$n-catchup-off")" \
            "$on_s" "$(rss "$job-$n-restart-on")" "$off_s" "$(rss "$job-$n-restart-off")" \
            "$(ratio "$off_s" "$on_s")" "$size" >>"$REPORT"
    done
done
rm -rf "$WORK"
cat "$REPORT"
cp "$REPORT" "$RESULTS/latest.md"
