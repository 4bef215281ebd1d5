#!/usr/bin/env bash
# kappa batch benchmark: kappa vs DuckDB vs Polars on count-by and join over CSV.
#
#   benches/batch/run.sh                 # full run: 10M-row fact tables, best of 3
#   ROWS=100000 benches/batch/run.sh     # quick smoke run
#
# Environment:
#   ROWS=N        rows in fact.csv / fact_skew.csv (default 10000000)
#   RUNS=N        timed runs per measurement, best is reported (default 3)
#   WORKERS=N     kappa --workers and DuckDB/Polars threads (default 2)
#   SKIP_BUILD=1  do not run `cargo build --profile perf` (use the existing binaries)
#   PEERS_JSON=F  reuse a peers.py JSON result instead of running peers.py
#   SKIP_PEERS=1  do not time DuckDB/Polars at all
#   KEEP_OUTPUT=1 keep kappa's (large) join outputs under results/out/
#   KAPPA=, CSV_FLOOR=  binaries to time (default target/perf/{kappa,csv_floor})
#
# Data goes to benches/batch/data/ (ROWS=10000000) or benches/batch/data/rows-N/;
# the table goes to stdout, benches/batch/results/latest.md and a timestamped copy.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
if [[ $ROWS == 10000000 ]]; then DATA=$HERE/data; else DATA=$HERE/data/rows-$ROWS; fi
RESULTS=$HERE/results
OUT=$RESULTS/out
LOGS=$RESULTS/logs
KAPPA=${KAPPA:-$ROOT/target/perf/kappa}
CSV_FLOOR=${CSV_FLOOR:-$ROOT/target/perf/csv_floor}
mkdir -p "$RESULTS" "$OUT" "$LOGS"
TMP=$(mktemp -d /tmp/kappa-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

say() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- build
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf --features bench-tools"
    (cd "$ROOT" && cargo build --profile perf --features bench-tools)
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found (build failed or SKIP_BUILD=1 without a build)" >&2; exit 1; }

# ---------------------------------------------------------------- data
say "generating data (ROWS=$ROWS) into $DATA"
python3 "$HERE/gen_data.py" "$DATA" --rows "$ROWS"
FACT=$DATA/fact.csv FACT_SKEW=$DATA/fact_skew.csv DIM=$DATA/dim.csv
cat "$FACT" "$FACT_SKEW" "$DIM" >/dev/null   # warm the page cache

# ---------------------------------------------------------------- timing
HAVE_TIME=0
if [[ -x /usr/bin/time ]] && /usr/bin/time -f '%M' -o "$TMP/probe" true 2>/dev/null; then HAVE_TIME=1; fi

# results.tsv: name, best wall seconds, max RSS KiB of the best run ("" if unknown),
# all run times (space separated), status (ok|FAILED|missing), output lines
: >"$TMP/results.tsv"

# out_lines PATH: lines in PATH (a file, or every file under a directory)
out_lines() {
    if [[ -f $1 ]]; then wc -l <"$1"
    elif [[ -d $1 ]]; then find "$1" -type f -exec cat {} + | wc -l
    else echo ""; fi
}

# bench NAME OUTPUT_PATH CMD... : run CMD $RUNS times, record the best wall time.
bench() {
    local name=$1 output=$2; shift 2
    local best="" best_rss="" all="" i t0 t1 dt rss status=ok
    say "timing $name: $*"
    [[ $output == - ]] || rm -rf "$output"   # never report a stale output
    for ((i = 1; i <= RUNS; i++)); do
        local rc=0
        t0=$EPOCHREALTIME
        if ((HAVE_TIME)); then
            /usr/bin/time -f '%M' -o "$TMP/rss" "$@" >"$LOGS/$name.stdout" 2>"$LOGS/$name.stderr" || rc=$?
        else
            "$@" >"$LOGS/$name.stdout" 2>"$LOGS/$name.stderr" || rc=$?
        fi
        t1=$EPOCHREALTIME
        if ((rc != 0)); then
            echo "   run $i FAILED (exit $rc); last lines of $LOGS/$name.stderr:" >&2
            tail -n 5 "$LOGS/$name.stderr" | sed 's/^/     /' >&2
            status=FAILED
            break
        fi
        dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        rss=""
        if ((HAVE_TIME)); then rss=$(tail -n 1 "$TMP/rss"); fi
        all+="${all:+ }$dt"
        if [[ -z $best ]] || awk -v a="$dt" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$dt best_rss=$rss
        fi
        echo "   run $i: ${dt}s${rss:+  maxrss ${rss} KiB}" >&2
    done
    [[ $status == ok ]] || best=""
    local lines=""
    [[ $output == - || $status != ok ]] || lines=$(out_lines "$output")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$best" "$best_rss" "$all" "$status" "$lines" >>"$TMP/results.tsv"
}

missing() { printf '%s\t\t\t\tmissing\t\n' "$1" >>"$TMP/results.tsv"; }

bench wc_l - wc -l "$FACT"
if [[ -x $CSV_FLOOR ]]; then
    bench csv_floor - "$CSV_FLOOR" "$FACT"
else
    say "no $CSV_FLOOR (add the csv_floor [[bin]] to Cargo.toml); skipping the csv parse floor"
    missing csv_floor
fi

bench kappa_count "$OUT/kappa_count.csv" \
    "$KAPPA" run count-by --input "input=$FACT" --param key=key \
    --output "$OUT/kappa_count.csv" --overwrite --workers "$WORKERS"
bench kappa_join "$OUT/kappa_join.csv" \
    "$KAPPA" run join --input "left=$FACT" --input "right=$DIM" --param on=key=key --param kind=inner \
    --output "$OUT/kappa_join.csv" --overwrite --workers "$WORKERS"
bench kappa_skew_join "$OUT/kappa_skew_join.csv" \
    "$KAPPA" run join --input "left=$FACT_SKEW" --input "right=$DIM" --param on=key=key --param kind=inner \
    --output "$OUT/kappa_skew_join.csv" --overwrite --workers "$WORKERS"
if [[ ${KEEP_OUTPUT:-0} != 1 ]]; then rm -rf "$OUT/kappa_join.csv" "$OUT/kappa_skew_join.csv"; fi

# ---------------------------------------------------------------- peers
PEERS_OUT=$RESULTS/peers.json
if [[ ${SKIP_PEERS:-0} == 1 ]]; then
    say "SKIP_PEERS=1: not timing DuckDB/Polars"
    echo '{"notes": ["peers not run (SKIP_PEERS=1)"]}' >"$TMP/peers.json"
elif [[ -n ${PEERS_JSON:-} ]]; then
    say "reusing peer timings from $PEERS_JSON"
    cp "$PEERS_JSON" "$TMP/peers.json"
else
    say "timing DuckDB and Polars (peers.py)"
    if python3 "$HERE/peers.py" "$DATA" --out-dir "$OUT/peers" --runs "$RUNS" --threads "$WORKERS" >"$TMP/peers.json"; then
        cp "$TMP/peers.json" "$PEERS_OUT"
    else
        echo "warning: peers.py failed; DuckDB/Polars reported as skipped" >&2
        echo '{"notes": ["peers.py failed"]}' >"$TMP/peers.json"
    fi
fi

# ---------------------------------------------------------------- report
MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
MEM_KB=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then COMMIT+=" (dirty)"; fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

python3 - "$TMP/results.tsv" "$TMP/peers.json" "$RESULTS/latest.md" "$RESULTS/$STAMP-rows$ROWS.md" \
    "$ROWS" "$RUNS" "$WORKERS" "$(nproc)" "${MODEL:-unknown}" "$MEM_KB" "$(date -u '+%Y-%m-%d %H:%M UTC')" \
    "$COMMIT" "$HAVE_TIME" <<'PY'
import json, sys

(tsv, peers_json, latest, stamped, rows, runs, workers, nproc, model, mem_kb, date,
 commit, have_time) = sys.argv[1:]
k = {}
for line in open(tsv):
    name, best, rss, all_t, status, lines = line.rstrip("\n").split("\t")
    k[name] = dict(best=float(best) if best else None, rss=int(rss) if rss else None,
                   all=all_t, status=status, lines=lines)
try:
    peers = json.load(open(peers_json))
except Exception as e:
    peers = {"notes": [f"could not read peers.py output: {e}"]}
duck = peers.get("duckdb") or {}
pol = peers.get("polars") or {}

def s(x):
    return "—" if x is None else f"{x:.3f}"

def ratio(a, b):
    return "—" if a is None or not b else f"{a / b:.2f}×"

def kt(name):
    r = k.get(name) or {}
    if r.get("status") == "FAILED":
        return None, "FAILED"
    return r.get("best"), s(r.get("best"))

def mib(name):
    r = (k.get(name) or {}).get("rss")
    return "—" if r is None else f"{r / 1024:.0f}"

rows_i = int(rows)
out = []
out.append(f"# kappa batch benchmark — {rows_i:,} fact rows\n")
out.append(f"- date: {date}; kappa commit: {commit}")
out.append(f"- machine: {nproc} cores ({model}), {int(mem_kb) / 1048576:.1f} GiB RAM")
v = peers.get("versions", {})
out.append(f"- kappa `--workers {workers}`; DuckDB {v.get('duckdb', 'n/a')} and Polars {v.get('polars', 'n/a')} "
           f"with {peers.get('threads', workers)} threads; best of {runs} runs, warm page cache, "
           "CSV parse included everywhere\n")
out.append("| query | kappa (s) | DuckDB (s) | Polars (s) | kappa/DuckDB | kappa/Polars | kappa max RSS (MiB) |")
out.append("|---|---:|---:|---:|---:|---:|---:|")
table = [
    ("count by key → CSV", "kappa_count", "count"),
    ("join fact⋈dim → CSV (peers unsorted)", "kappa_join", "join_write"),
    ("join fact⋈dim → CSV (peers sorted)", "kappa_join", "join_write_sorted"),
    ("join fact⋈dim, peers count(*) only", "kappa_join", "join_count"),
    ("skew join → CSV (peers unsorted)", "kappa_skew_join", "skew_join_write"),
    ("skew join → CSV (peers sorted)", "kappa_skew_join", "skew_join_write_sorted"),
    ("skew join, peers count(*) only", "kappa_skew_join", "skew_join_count"),
]
for label, kname, q in table:
    kv, ks = kt(kname)
    d, p = duck.get(q), pol.get(q)
    out.append(f"| {label} | {ks} | {s(d)} | {s(p)} | {ratio(kv, d)} | {ratio(kv, p)} | {mib(kname)} |")
out.append("")
out.append("| floor on fact.csv | time (s) |")
out.append("|---|---:|")
out.append(f"| `wc -l` | {kt('wc_l')[1]} |")
cf = k.get("csv_floor", {})
out.append(f"| csv crate parse, 2 × i64 (`csv_floor`, 1 thread) | "
           f"{'not built' if cf.get('status') == 'missing' else kt('csv_floor')[1]} |")
out.append("")
out.append("Notes:")
out.append("- kappa writes the full join output (sorted); peers' `count(*) only` rows write nothing "
           "and `unsorted` rows write the join result in whatever order the engine produces.")
if have_time != "1":
    out.append("- /usr/bin/time not available: max RSS not measured.")
lines = {n: r["lines"] for n, r in k.items() if r.get("lines")}
if lines:
    out.append("- kappa output lines: " + ", ".join(f"{n} {l}" for n, l in lines.items()))
orow = peers.get("output_rows", {}).get("duckdb", {})
if orow:
    out.append(f"- DuckDB result rows: count {orow.get('count')}, join {orow.get('join_write')}, "
               f"skew join {orow.get('skew_join_write')}")
for n, r in k.items():
    if r["status"] == "FAILED":
        out.append(f"- {n} FAILED (see benches/batch/results/logs/{n}.stderr)")
    elif r["all"]:
        out.append(f"- {n} runs: {r['all']} s")
for note in peers.get("notes", []):
    out.append(f"- peers: {note}")
text = "\n".join(out) + "\n"
for path in (latest, stamped):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
print(text)
PY
say "wrote $RESULTS/latest.md"
if grep -q $'\tFAILED\t' "$TMP/results.tsv"; then
    echo "error: some kappa runs failed (see $LOGS/)" >&2
    exit 1
fi
