#!/usr/bin/env bash
# SQL jobs (issue 18): (A) a SQL query against the equivalent built-in job on
# the batch benchmark's data, same binary, same workers; (B) TPC-H queries
# (benches/sql/tpch/*.sql) beside DuckDB on the same CSV files, each answer
# checked against DuckDB's. Timing helpers: benches/lib.sh.
#
#   benches/sql/run.sh                      # 10M-row batch data, TPC-H SF 1
#   ROWS=1000000 SF=0.1 benches/sql/run.sh  # quicker
#
# Environment:
#   ROWS=N        rows of the batch data (default 10000000; benches/batch/gen_data.py)
#   SF=X          TPC-H scale factor (default 1; tpchgen-cli)
#   RUNS=N        timed runs per measurement, the best is reported (default 2)
#   WORKERS=N     kappa --workers and DuckDB threads (default 2)
#   PARTS=A,B     which parts to run (default A,B)
#   QUERIES="q01 q06"  TPC-H queries to run (default: every file in tpch/)
#   SKIP_BUILD=1  use the existing target/perf/kappa
#
# DuckDB and tpchgen-cli are installed into benches/sql/.venv. The table goes
# to stdout and benches/sql/results/latest.md.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-10000000}
SF=${SF:-1}
RUNS=${RUNS:-2}
WORKERS=${WORKERS:-2}
PARTS=${PARTS:-A,B}
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
RESULTS=$HERE/results
OUT=$RESULTS/out
LOGS=$RESULTS/logs
mkdir -p "$RESULTS" "$OUT" "$LOGS"
TMP=$(mktemp -d /tmp/kappa-sql-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf"
    (cd "$ROOT" && flock "$CPU_LOCK" cargo build --profile perf --features bench-tools)
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found" >&2; exit 1; }

VENV=$HERE/.venv
if ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null || [[ ! -x $VENV/bin/tpchgen-cli ]]; then
    say "installing duckdb and tpchgen-cli into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet duckdb==2.0.1 tpchgen-cli==4.0.0
fi
PY=$VENV/bin/python

report=$TMP/report.md
{
    echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC on $(machine), kappa at $(commit_id "$ROOT"),"
    echo "$WORKERS workers / DuckDB threads, best of $RUNS."
    echo
} >"$report"

# ------------------------------------------------ A: SQL against built-in jobs
if [[ $PARTS == *A* ]]; then
    if [[ $ROWS == 10000000 ]]; then DATA=$ROOT/benches/batch/data; else DATA=$ROOT/benches/batch/data/rows-$ROWS; fi
    say "batch data (ROWS=$ROWS) in $DATA"
    python3 "$ROOT/benches/batch/gen_data.py" "$DATA" --rows "$ROWS"
    FACT=$DATA/fact.csv DIM=$DATA/dim.csv
    cat "$FACT" "$DIM" >/dev/null
    run_pair() { # NAME "JOB ARGS" "JOB INPUTS" "SQL" "SQL INPUTS": the job, then the query
        local name=$1 job=$2 job_inputs=$3 sql=$4 sql_inputs=$5
        # shellcheck disable=SC2086
        bench "job_$name" "$KAPPA" run $job $job_inputs -o "$OUT/job_$name" --overwrite --workers "$WORKERS"
        # shellcheck disable=SC2086
        bench "sql_$name" "$KAPPA" run --sql-text "$sql" $sql_inputs -o "$OUT/sql_$name" --overwrite --workers "$WORKERS"
        # Same rows (headers aside): the query computes what the job does.
        if ! cmp -s <(tail -n +2 "$OUT/job_$name"/*.csv) <(tail -n +2 "$OUT/sql_$name/result.csv"); then
            echo "error: $name: the SQL query's rows differ from the job's" >&2
            exit 1
        fi
    }
    run_pair count "count-by --param key=key" "--input input=$FACT" \
        "SELECT key, count(*) AS count FROM input GROUP BY key" "--input input=$FACT"
    run_pair group "group-by --param key=key --param agg=count,sum:value,max:value" "--input input=$FACT" \
        "SELECT key, count(*) AS count, sum(value) AS sum_value, max(value) AS max_value FROM input GROUP BY key" \
        "--input input=$FACT"
    run_pair join "join --param on=key=key --param kind=inner" "--input left=$FACT --input right=$DIM" \
        "SELECT f.key, f.value, d.attr FROM fact f JOIN dim d ON f.key = d.key" \
        "--input fact=$FACT --input dim=$DIM"
    {
        echo "A. SQL against the built-in job, $ROWS-row fact.csv (benches/batch):"
        echo
        echo "| work | built-in job | SQL | SQL / job | peak RSS MiB job / SQL |"
        echo "|---|---:|---:|---:|---:|"
        for name in count group join; do
            read -r jw _ jr <<<"$(best "job_$name")"
            read -r sw _ sr <<<"$(best "sql_$name")"
            echo "| $name | ${jw}s | ${sw}s | $(ratio "$sw" "$jw") | $((jr / 1024)) / $((sr / 1024)) |"
        done
        echo
    } >>"$report"
fi

# ------------------------------------------------ B: TPC-H beside DuckDB
if [[ $PARTS == *B* ]]; then
    TPCH=$HERE/data/sf$SF
    if [[ ! -f $TPCH/.done ]]; then
        say "tpchgen-cli csv -s $SF into $TPCH"
        rm -rf "$TPCH"
        "$VENV/bin/tpchgen-cli" csv -s "$SF" --output-dir="$TPCH"
        touch "$TPCH/.done"
    fi
    cat "$TPCH"/*.csv >/dev/null
    tables=(lineitem orders customer part partsupp supplier nation region)
    : >"$TMP/tpch.tsv"
    for file in "$HERE"/tpch/q*.sql; do
        q=$(basename "$file" .sql)
        if [[ -n ${QUERIES:-} && " $QUERIES " != *" $q "* ]]; then continue; fi
        body=$(grep -v '^--' "$file")
        inputs=()
        for t in "${tables[@]}"; do
            if grep -qw "$t" <<<"$body"; then inputs+=(--input "$t=$TPCH/$t.csv"); fi
        done
        bench "kappa_$q" "$KAPPA" run --sql "$file" "${inputs[@]}" -o "$OUT/kappa_$q" --overwrite --workers "$WORKERS"
        bench "duckdb_$q" "$PY" "$HERE/duckdb_query.py" "$TPCH" "$file" "$OUT/duckdb_$q.csv" "$WORKERS"
        same=$("$PY" "$HERE/duckdb_query.py" --compare "$OUT/kappa_$q/result.csv" "$OUT/duckdb_$q.csv" || true)
        printf '%s\t%s\n' "$q" "$same" >>"$TMP/tpch.tsv"
    done
    {
        echo "B. TPC-H at scale factor $SF (tpchgen-cli CSV; both engines parse the CSV files in the timed run):"
        echo
        echo "| query | kappa | DuckDB | kappa / DuckDB | peak RSS MiB kappa / DuckDB | same answer |"
        echo "|---|---:|---:|---:|---:|---|"
        while IFS=$'\t' read -r q same; do
            read -r kw _ kr <<<"$(best "kappa_$q")"
            read -r dw _ dr <<<"$(best "duckdb_$q")"
            echo "| $q | ${kw:-failed}s | ${dw:-failed}s | $(ratio "$kw" "$dw") | $((${kr:-0} / 1024)) / $((${dr:-0} / 1024)) | $same |"
        done <"$TMP/tpch.tsv"
        echo
    } >>"$report"
fi

cat "$report"
cp "$report" "$RESULTS/latest.md"
