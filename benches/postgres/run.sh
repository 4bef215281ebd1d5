#!/usr/bin/env bash
# The PostgreSQL table store against SQLite and against the floor.
#
#   benches/postgres/run.sh                 # 1M rows for the stream, best of 2
#   ROWS=200000 RUNS=1 benches/postgres/run.sh
#
# 1. `cargo bench --bench table_commit` (benches/table_commit.rs): epoch commit
#    throughput (inserts, updates, deletes, in changes/s) and commit-to-visible
#    latency of a reader on its own connection, SQLite and PostgreSQL, and a
#    plain COPY of the same rows into PostgreSQL (the floor).
# 2. The stream benchmark's group-by (benches/batch/gen_data.py's `key,value`
#    rows, 100k keys, a 2-partition topic): `kappa stream group-by key=key
#    agg=count,sum:value --until-caught-up` into SQLite and into PostgreSQL,
#    timed end to end; both tables are checked equal to `kappa run`'s output.
#
# The server is a private cluster of Debian's postgresql (KAPPA_TEST_PGBIN or
# /usr/lib/postgresql/*/bin) with fsync on and synchronous_commit on (durable,
# like SQLite's synchronous=FULL), run as the postgres user, stopped at exit.
#
# Environment: ROWS (1000000), RUNS (2), WORKERS (2), KAPPA
# (target/perf/kappa), SKIP_BUILD=1 (no cargo build).
set -euo pipefail
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-1000000}
RUNS=${RUNS:-2}
WORKERS=${WORKERS:-2}
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
PGBIN=${KAPPA_TEST_PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
DATA=$ROOT/benches/stream/data/rows-$ROWS
RESULTS=$HERE/results
LOGS=$RESULTS/logs
TMP=$(mktemp -d /tmp/kappa-pg-bench.XXXXXX)
chown postgres "$TMP"
cleanup() {
    su postgres -c "$PGBIN/pg_ctl -D $TMP/data -m fast stop" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT
BENCH_TMP=$TMP/bench
. "$ROOT/benches/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
su postgres -c "$PGBIN/initdb -D $TMP/data -A trust -U postgres >/dev/null"
su postgres -c "$PGBIN/pg_ctl -D $TMP/data -l $TMP/pg.log -w start \
    -o '-p $PORT -k $TMP -c listen_addresses=127.0.0.1 -c shared_buffers=512MB'" >/dev/null
URL=postgresql://postgres@127.0.0.1:$PORT/postgres
say "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') at $URL (fsync on)"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf"
    (cd "$ROOT" && cargo build --profile perf --bin kappa)
fi

say "table_commit: epoch commits and commit-to-visible latency"
(cd "$ROOT" && KAPPA_BENCH_POSTGRES=$URL KAPPA_BENCH_DIR=$TMP \
    flock "$CPU_LOCK" cargo bench --bench table_commit 2>"$LOGS/table_commit.stderr") \
    | tee "$TMP/commit.md"

say "generating data (ROWS=$ROWS) into $DATA"
python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS" --jobs 1 >&2
FACT=$DATA/fact.csv
export KAPPA_LOG_DIR=$TMP/log
"$KAPPA" log create fact --partitions 2 >/dev/null
"$KAPPA" log produce fact --file "$FACT" --key key >/dev/null
"$KAPPA" run group-by -i "input=$FACT" -p key=key -p agg=count,sum:value -o "$TMP/batch" \
    --workers "$WORKERS" >/dev/null 2>&1
sort "$TMP/batch/groups.csv" >"$TMP/batch.sorted"

check_table() { # STORE: the live `groups` equals the batch output
    KAPPA_TABLE_DB=$1 "$KAPPA" table show groups --csv --limit 100000000 \
        | grep -v ' distinct rows' | sort >"$TMP/table.sorted"
    cmp -s "$TMP/table.sorted" "$TMP/batch.sorted" || { echo "error: table differs from batch ($1)" >&2; exit 1; }
}
fresh_sqlite() { rm -rf "$TMP/sqlite"; mkdir -p "$TMP/sqlite"; }
fresh_pg() {
    psql -q -h 127.0.0.1 -p "$PORT" -U postgres -c 'DROP DATABASE IF EXISTS stream WITH (FORCE)' \
        -c 'CREATE DATABASE stream' postgres
}
STREAM=(stream group-by -i input=fact -p key=key -p agg=count,sum:value --workers "$WORKERS" --until-caught-up --quiet)
PRE=fresh_sqlite bench stream_sqlite env KAPPA_TABLE_DB="$TMP/sqlite/tables.db" "$KAPPA" "${STREAM[@]}"
check_table "$TMP/sqlite/tables.db"
PRE=fresh_pg bench stream_postgres env KAPPA_TABLE_DB="postgresql://postgres@127.0.0.1:$PORT/stream" "$KAPPA" "${STREAM[@]}"
check_table "postgresql://postgres@127.0.0.1:$PORT/stream"

read -r sw _ srss < <(best stream_sqlite)
read -r pw _ prss < <(best stream_postgres)
{
    echo "## PostgreSQL table store ($(date -u +%F), $(nproc) cores, PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), fsync on)"
    echo
    cat "$TMP/commit.md"
    echo
    echo "| \`kappa stream group-by\` ($ROWS rows, 100k keys, $WORKERS workers) | wall (s) | rows/s | max RSS (MiB) |"
    echo "|---|---:|---:|---:|"
    echo "| into SQLite | $sw | $(awk -v r="$ROWS" -v t="$sw" 'BEGIN{printf "%.0f", r/t}') | $((srss / 1024)) |"
    echo "| into PostgreSQL | $pw | $(awk -v r="$ROWS" -v t="$pw" 'BEGIN{printf "%.0f", r/t}') | $((prss / 1024)) |"
    echo "| PostgreSQL / SQLite | $(ratio "$pw" "$sw") | | |"
} | tee "$RESULTS/latest.md"
