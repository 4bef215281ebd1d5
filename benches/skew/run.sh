#!/usr/bin/env bash
# kappa skew benchmark: the `followers` job (follows ⋈ posts fan-out + follower
# counts) on Zipf-skewed and on uniform follows of the same size, for each join
# strategy; wall time and the imbalance (max / mean records per worker) of the
# hot exchanges, from `kappa run --stats`.
#
#   benches/skew/run.sh                      # 5M follows, 2 workers timed, 4 and 8 for imbalance
#   FOLLOWS=200000 RUNS=1 benches/skew/run.sh   # quick smoke run
#
# Environment:
#   FOLLOWS=N      follows per table (default 5000000); ACCOUNTS=N (default 2000000)
#   RUNS=N         timed runs per figure, best reported (default 3)
#   WORKERS=N      workers of the timed runs (default 2); WIDE="4 8" worker counts
#                  run once more with --stats only for the imbalance figure
#   PROFILE=P      cargo profile to build and run (default release)
#   SKIP_BUILD=1   use the existing binary
# Every cargo command and timed run holds the machine's CPU lock
# (flock /tmp/kappa-cpu.lock). Data goes to benches/skew/data/ (gitignored);
# the table to stdout and benches/skew/results/latest.md.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FOLLOWS=${FOLLOWS:-5000000}
ACCOUNTS=${ACCOUNTS:-2000000}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
WIDE=${WIDE:-"4 8"}
PROFILE=${PROFILE:-release}
LOCK=/tmp/kappa-cpu.lock
DATA=$HERE/data/follows-$FOLLOWS
RESULTS=$HERE/results
KAPPA=$ROOT/target/$PROFILE/kappa
mkdir -p "$RESULTS/logs"
TMP=$(mktemp -d /tmp/kappa-skew.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
say() { printf '== %s\n' "$*" >&2; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile $PROFILE"
    (cd "$ROOT" && flock "$LOCK" cargo build --profile "$PROFILE" --bin kappa)
fi
say "generating data into $DATA"
flock "$LOCK" python3 "$HERE/gen_data.py" "$DATA" --follows "$FOLLOWS" --accounts "$ACCOUNTS"
cat "$DATA"/*.csv >/dev/null   # warm the page cache

# results.tsv: data, strategy, workers, best seconds (or ""), all runs, stats file
: >"$TMP/results.tsv"

# one DATA STRATEGY WORKERS TIMED_RUNS: TIMED_RUNS timed runs without --stats, then one with.
one() {
    local data=$1 strategy=$2 workers=$3 runs=$4 best="" all="" i t0 t1 dt
    local name=$data-$strategy-w$workers out=$TMP/out
    local args=(run followers --input "follows=$DATA/follows_$data.csv" --input "posts=$DATA/posts.csv"
        --param "strategy=$strategy" --output "$out" --overwrite --workers "$workers")
    for ((i = 1; i <= runs; i++)); do
        # Timed inside the lock: waiting for other users of the CPU is not counted.
        dt=$(E="$RESULTS/logs/$name.stderr" flock "$LOCK" bash -c 't0=$EPOCHREALTIME; "$@" 2>"$E" || exit 1
            t1=$EPOCHREALTIME; awk -v a="$t0" -v b="$t1" "BEGIN { printf \"%.2f\", b - a }"' _ "$KAPPA" "${args[@]}")
        all+="${all:+ }$dt"
        if [[ -z $best ]] || awk -v a="$dt" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$dt; fi
    done
    flock "$LOCK" "$KAPPA" "${args[@]}" --stats 2>"$RESULTS/logs/$name.stats"
    rm -rf "$out"
    say "$name: best ${best:-—} s (runs: ${all:-none})"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$data" "$strategy" "$workers" "$best" "$all" "$RESULTS/logs/$name.stats" >>"$TMP/results.tsv"
}

for data in skew uniform; do
    for strategy in shuffle broadcast skew auto; do
        one "$data" "$strategy" "$WORKERS" "$RUNS"
    done
done
for w in $WIDE; do
    for strategy in shuffle broadcast skew auto; do
        one skew "$strategy" "$w" 0
    done
done

MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "no commit")
if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then COMMIT+=" (dirty)"; fi
python3 - "$TMP/results.tsv" "$RESULTS/latest.md" "$FOLLOWS" "$ACCOUNTS" "$RUNS" "$(nproc)" \
    "${MODEL:-unknown}" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$COMMIT" "$PROFILE" <<'PY'
import re, sys
tsv, latest, follows, accounts, runs, nproc, model, date, commit, profile = sys.argv[1:]

def stats(path):
    """exchange name -> (records, max/mean, per-worker counts); strategy notes."""
    rows, notes = {}, []
    text = open(path).read()
    for line in text.splitlines():
        if line.startswith("  ") and "strategy" in line:
            notes.append(line.strip())
        m = re.match(r"^(join left \(\w+[^)]*\)|join right \(\w+\)|group-by \(\w+\))\s+(\d+)\s+([\d.]+)\s+(.*)$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)), m.group(4))
    return rows, notes

def pick(rows, prefix):
    for k, v in rows.items():
        if k.startswith(prefix):
            return k, v
    return None, None

out = [f"# kappa skew benchmark: `followers`, {int(follows):,} follows, {int(accounts):,} accounts\n",
       f"- date: {date}; commit {commit}; profile `{profile}`; {nproc} cores ({model}); best of {runs} timed runs (without --stats), imbalance from one more run with --stats\n",
       "| follows | strategy | workers | wall (s) | join: hot side max/mean | group-by max/mean | join right records | chosen |",
       "|---|---|---:|---:|---:|---:|---:|---|"]
for line in open(tsv):
    data, strategy, workers, best, allruns, path = line.rstrip("\n").split("\t")
    rows, notes = stats(path)
    jk, jv = pick(rows, "join left")
    gk, gv = pick(rows, "group-by")
    rk, rv = pick(rows, "join right")
    chosen = "; ".join(n.split(": strategy ")[1].split(" (")[0] for n in notes if ": strategy " in n)
    out.append(f"| {data} | {strategy} | {workers} | {best or '—'} | "
               f"{jv[1]:.3f} ({jv[2]})" if jv else f"| {data} | {strategy} | {workers} | {best or '—'} | —")
    out[-1] += (f" | {gv[1]:.3f} ({gv[2]})" if gv else " | —") + (f" | {rv[0]:,}" if rv else " | —") + f" | {chosen} |"
text = "\n".join(out) + "\n"
open(latest, "w").write(text)
print(text)
PY
say "wrote $RESULTS/latest.md"
