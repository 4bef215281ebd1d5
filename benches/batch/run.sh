#!/usr/bin/env bash
# kappa batch benchmark: kappa vs DuckDB vs Polars on count-by, group-by and join over CSV
# (timing helpers: benches/lib.sh).
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
BENCH_TMP=$TMP
. "$ROOT/benches/lib.sh"

# ---------------------------------------------------------------- build
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf --features bench-tools"
    (cd "$ROOT" && flock "$CPU_LOCK" cargo build --profile perf --features bench-tools)
fi
[[ -x $KAPPA ]] || { echo "error: $KAPPA not found (build failed or SKIP_BUILD=1 without a build)" >&2; exit 1; }

# ---------------------------------------------------------------- data
say "generating data (ROWS=$ROWS) into $DATA"
python3 "$HERE/gen_data.py" "$DATA" --rows "$ROWS"
FACT=$DATA/fact.csv FACT_SKEW=$DATA/fact_skew.csv DIM=$DATA/dim.csv
cat "$FACT" "$FACT_SKEW" "$DIM" >/dev/null   # warm the page cache

# ---------------------------------------------------------------- timing

# out_lines NAME PATH: record the lines of PATH (a file, or every file under a directory)
out_lines() {
    local n=""
    if [[ -f $2 ]]; then n=$(wc -l <"$2")
    elif [[ -d $2 ]]; then n=$(find "$2" -type f -exec cat {} + | wc -l); fi
    printf '%s\t%s\n' "$1" "$n" >>"$TMP/lines.tsv"
}
: >"$TMP/lines.tsv"

bench wc_l wc -l "$FACT"
if [[ -x $CSV_FLOOR ]]; then
    bench csv_floor "$CSV_FLOOR" "$FACT"
else
    say "no $CSV_FLOOR (add the csv_floor [[bin]] to Cargo.toml); skipping the csv parse floor"
fi

kappa_run() { # NAME JOB ARGS...: times `kappa run JOB ARGS... --output OUT/NAME.csv`
    local name=$1 job=$2; shift 2
    rm -rf "$OUT/$name.csv"   # never report a stale output
    bench "$name" "$KAPPA" run "$job" "$@" --output "$OUT/$name.csv" --overwrite --workers "$WORKERS"
    out_lines "$name" "$OUT/$name.csv"
}
kappa_run kappa_count count-by --input "input=$FACT" --param key=key
kappa_run kappa_group group-by --input "input=$FACT" --param key=key --param agg=count,sum:value,max:value
kappa_run kappa_join join --input "left=$FACT" --input "right=$DIM" --param on=key=key --param kind=inner
kappa_run kappa_skew_join join --input "left=$FACT_SKEW" --input "right=$DIM" --param on=key=key --param kind=inner
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
    if flock "$CPU_LOCK" python3 "$HERE/peers.py" "$DATA" --out-dir "$OUT/peers" --runs "$RUNS" --threads "$WORKERS" >"$TMP/peers.json"; then
        cp "$TMP/peers.json" "$PEERS_OUT"
    else
        echo "warning: peers.py failed; DuckDB/Polars reported as skipped" >&2
        echo '{"notes": ["peers.py failed"]}' >"$TMP/peers.json"
    fi
fi

# ---------------------------------------------------------------- report
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

python3 - "$TMP/results.tsv" "$TMP/lines.tsv" "$TMP/peers.json" "$RESULTS/latest.md" "$RESULTS/$STAMP-rows$ROWS.md" \
    "$ROWS" "$RUNS" "$WORKERS" "$(machine)" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(commit_id "$ROOT")" <<'PY'
import json, sys

(tsv, lines_tsv, peers_json, latest, stamped, rows, runs, workers, machine, date, commit) = sys.argv[1:]
k = {}
for line in open(tsv):
    name, best, all_t, cpu, rss, status = line.rstrip("\n").split("\t")
    k[name] = dict(best=float(best) if best else None, rss=int(rss) if rss else None,
                   all=all_t, status=status, lines="")
for line in open(lines_tsv):
    name, n = line.rstrip("\n").split("\t")
    k.setdefault(name, {"status": "FAILED", "all": ""})["lines"] = n.strip()
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
out.append(f"- machine: {machine}")
v = peers.get("versions", {})
out.append(f"- kappa `--workers {workers}`; DuckDB {v.get('duckdb', 'n/a')} and Polars {v.get('polars', 'n/a')} "
           f"with {peers.get('threads', workers)} threads; best of {runs} runs, warm page cache, "
           "CSV parse included everywhere\n")
out.append("| query | kappa (s) | DuckDB (s) | Polars (s) | kappa/DuckDB | kappa/Polars | max RSS MiB: kappa / DuckDB / Polars |")
out.append("|---|---:|---:|---:|---:|---:|---:|")
rss_of = peers.get("max_rss_kib") or {}
def peer_mib(engine, q):
    r = (rss_of.get(engine) or {}).get(q)
    return "—" if r is None else f"{r / 1024:.0f}"
table = [
    ("count by key → CSV (peers unsorted)", "kappa_count", "count"),
    ("count by key → CSV (peers sorted)", "kappa_count", "count_sorted"),
    ("group by key: count, sum, max → CSV (peers sorted)", "kappa_group", "group_sorted"),
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
    out.append(f"| {label} | {ks} | {s(d)} | {s(p)} | {ratio(kv, d)} | {ratio(kv, p)} | "
               f"{mib(kname)} / {peer_mib('duckdb', q)} / {peer_mib('polars', q)} |")
out.append("")
out.append("| floor on fact.csv | time (s) |")
out.append("|---|---:|")
out.append(f"| `wc -l` | {kt('wc_l')[1]} |")
cf = k.get("csv_floor", {})
out.append(f"| csv crate parse, 2 × i64 (`csv_floor`, 1 thread) | "
           f"{'not built' if not cf else kt('csv_floor')[1]} |")
out.append("")
out.append("Notes:")
out.append("- kappa writes the full join output (sorted); peers' `count(*) only` rows write nothing "
           "and `unsorted` rows write the join result in whatever order the engine produces.")
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
if grep -q $'\tFAILED$' "$TMP/results.tsv"; then
    echo "error: some kappa runs failed (see $LOGS/)" >&2
    exit 1
fi
