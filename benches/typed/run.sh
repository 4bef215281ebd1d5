#!/usr/bin/env bash
# Typed records against rows (issue 14): the same job — examples/own-job's
# card-risk, payments per card and how many went to blocked merchants —
# written on the crate's own structs (`card-risk`: serde records in and
# out) and on kappa's dynamic rows (`card-risk-rows`), run by `kappa run`
# over the same files; the floor is `count-by card` on the same payments
# (one grouping, no join).
#
#   benches/typed/run.sh                 # ~1 minute on 2 vCPUs
#   ROWS=200000 RUNS=1 benches/typed/run.sh
#
# Environment: ROWS (payments, default 5000000; 200k cards, 5k merchants,
# 1 in 10 blocked), RUNS (best of, default 3), WORKERS (default 2),
# SKIP_BUILD=1 (do not `cargo build --profile perf -p own-job -p kappa`).
# Report to stdout and benches/typed/results/latest.md.
set -euo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=${ROWS:-5000000}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
DATA=$HERE/data/rows-$ROWS
RESULTS=$HERE/results
LOGS=$RESULTS/logs
BENCH_TMP=$(mktemp -d /tmp/kappa-typed-bench.XXXXXX)
trap 'rm -rf "$BENCH_TMP"' EXIT
. "$ROOT/benches/lib.sh"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    say "cargo build --profile perf -p own-job -p kappa"
    (cd "$ROOT" && cargo build --profile perf -p own-job -p kappa)
fi
JOB=$ROOT/target/perf/own-job
KAPPA=$ROOT/target/perf/kappa

if [[ ! -s $DATA/payments.csv ]]; then
    say "generating $ROWS payments in $DATA"
    mkdir -p "$DATA"
    python3 - "$DATA" "$ROWS" <<'PY'
import random, sys
out, rows = sys.argv[1], int(sys.argv[2])
rng = random.Random(14)
with open(f"{out}/payments.csv", "w") as f:
    f.write("card,merchant,amount\n")
    for _ in range(rows):
        f.write(f"c{rng.randrange(200000)},m{rng.randrange(5000)},{rng.randrange(1, 100000)}\n")
with open(f"{out}/blocked.csv", "w") as f:
    f.write("merchant\n")
    for m in range(0, 5000, 10):
        f.write(f"m{m}\n")
PY
fi

run() { # NAME JOB-BINARY JOB ARGS...
    local name=$1 bin=$2 job=$3; shift 3
    bench "$name" "$bin" run "$job" --workers "$WORKERS" -o "$BENCH_TMP/out-$name" --overwrite "$@"
}
IN=(-i "payments=$DATA/payments.csv" -i "blocked=$DATA/blocked.csv")
run typed "$JOB" card-risk "${IN[@]}"
run rows "$JOB" card-risk-rows "${IN[@]}"
run count_by "$KAPPA" count-by -i "input=$DATA/payments.csv" -p key=card
cmp -s "$BENCH_TMP/out-typed/risk.csv" "$BENCH_TMP/out-rows/risk.csv" \
    || { echo "error: card-risk and card-risk-rows disagree" >&2; exit 1; }

row() { # LABEL NAME
    read -r wall cpu rss < <(best "$2")
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$wall" "$cpu" "$((rss / 1024))" "$(ratio "$wall" "$(best rows | cut -d' ' -f1)")"
}
{
    echo "# Typed records against rows — $ROWS payments"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); kappa commit: $(commit_id "$ROOT")"
    echo "- machine: $(machine)"
    echo "- \`--workers $WORKERS\`, best of $RUNS runs, warm page cache; both jobs' outputs are byte-identical"
    echo
    echo "| run | wall (s) | CPU (s) | max RSS (MiB) | / rows |"
    echo "|---|---:|---:|---:|---:|"
    row "\`card-risk\` (structs: \`Payment\`, \`Blocked\`, \`Risk\`)" typed
    row "\`card-risk-rows\` (the same job on \`Row\`s)" rows
    row "floor: \`kappa run count-by -p key=card\` (one grouping, no join)" count_by
} | tee "$RESULTS/latest.md"
