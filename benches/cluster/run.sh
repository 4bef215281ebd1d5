#!/usr/bin/env bash
# kappa cluster benchmark: batch jobs, and streams over the retained log
# (2 partitions, until caught up, into a fresh table store), as 1 process x
# 2 workers against 2 processes x 1 worker on this host (`kappa cluster`),
# on the batch benchmark's data. The ratio is what serializing every exchange over TCP
# (loopback here) costs; on several machines, run the same two commands
# with a host file instead (see "Running on several machines" in README.md).
#
#   benches/cluster/run.sh               # 10M rows, best of 3
#   ROWS=1000000 RUNS=2 benches/cluster/run.sh
#
# Environment: ROWS (default 10000000), RUNS (default 3), KAPPA (default
# target/release/kappa; SKIP_BUILD=1 to use it as it is).
set -euo pipefail
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-3}
if [[ $ROWS == 10000000 ]]; then DATA=$ROOT/benches/batch/data; else DATA=$ROOT/benches/batch/data/rows-$ROWS; fi
KAPPA=${KAPPA:-$ROOT/target/release/kappa}
RESULTS=$HERE/results
LOGS=$RESULTS/logs
OUT=$RESULTS/out
mkdir -p "$RESULTS" "$LOGS" "$OUT"
TMP=$(mktemp -d /tmp/kappa-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --release"
    (cd "$ROOT" && flock "$CPU_LOCK" cargo build --release)
fi
say "generating data (ROWS=$ROWS) into $DATA"
python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS"
FACT=$DATA/fact.csv DIM=$DATA/dim.csv
cat "$FACT" "$DIM" >/dev/null

pair() { # NAME JOB ARGS...: the job on 1x2 and on 2x1; outputs must be identical
    local name=$1 job=$2; shift 2
    PRE="rm -rf '$OUT/$name-1x2'" bench "${name}_1x2" "$KAPPA" run "$job" "$@" -o "$OUT/$name-1x2" --workers 2
    PRE="rm -rf '$OUT/$name-2x1'" bench "${name}_2x1" "$KAPPA" cluster -n 2 -- run "$job" "$@" -o "$OUT/$name-2x1" --workers 1
    diff -r "$OUT/$name-1x2" "$OUT/$name-2x1" >/dev/null || { echo "error: $name: outputs differ" >&2; exit 1; }
    rm -rf "$OUT/$name-1x2" "$OUT/$name-2x1"
}
pair count count-by -i "input=$FACT" -p key=key
pair group group-by -i "input=$FACT" -p key=key -p agg=count,sum:value,max:value
pair join join -i "left=$FACT" -i "right=$DIM" -p on=key=key -p kind=inner

# Streams: the same rows in a 2-partition topic; each stream reads it all.
LOG=$TMP/log
"$KAPPA" log create fact --partitions 2 --log-dir "$LOG" >/dev/null
"$KAPPA" log produce fact --file "$FACT" --key key --fsync never --log-dir "$LOG" >/dev/null
stream_pair() { # NAME JOB ARGS...: the stream on 1x2 and on 2x1; tables must be identical
    local name=$1 job=$2; shift 2
    local a=$TMP/$name-1x2.db b=$TMP/$name-2x1.db
    PRE="rm -rf '$a'*" bench "stream_${name}_1x2" "$KAPPA" stream "$job" "$@" --log-dir "$LOG" --table-db "$a" --until-caught-up -q --workers 2
    PRE="rm -rf '$b'*" bench "stream_${name}_2x1" "$KAPPA" cluster -n 2 -- stream "$job" "$@" --log-dir "$LOG" --table-db "$b" --until-caught-up -q --workers 1
    local table=${*: -1}
    local q="SELECT * FROM $table ORDER BY 1"
    [[ $(sqlite3 "$a" "$q" | md5sum) == $(sqlite3 "$b" "$q" | md5sum) ]] || { echo "error: stream $name: tables differ" >&2; exit 1; }
}
stream_pair count count-by -i input=fact -p key=key --table counts
stream_pair group group-by -i input=fact -p key=key -p agg=count,sum:value --table groups

{
    echo "kappa cluster benchmark, $ROWS rows, best of $RUNS, $(machine), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(commit_id "$ROOT")"
    echo
    echo "| job | 1 process x 2 workers | 2 processes x 1 worker (TCP) | ratio |"
    echo "|---|---:|---:|---:|"
    for n in count group join; do
        read -r a _ _ <<<"$(best "${n}_1x2")"
        read -r b _ _ <<<"$(best "${n}_2x1")"
        echo "| $n | $a s | $b s | $(ratio "$b" "$a") |"
    done
    for n in count group; do
        read -r a _ _ <<<"$(best "stream_${n}_1x2")"
        read -r b _ _ <<<"$(best "stream_${n}_2x1")"
        echo "| stream $n | $a s | $b s | $(ratio "$b" "$a") |"
    done
} | tee "$RESULTS/latest.md"
