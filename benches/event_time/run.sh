#!/usr/bin/env bash
# Memory of a long windowed stream with and without state release.
#
# N events (default 3M) over K keys (default 1000), one per millisecond and
# slightly out of order, streamed by `window-agg` (tumbling 1 s windows,
# count) from a two-partition topic, once with `--late correct` (every
# window's state kept for ever) and once with `--late drop
# --allowed-lateness 2s` (closed windows released). Prints wall time and
# peak RSS of each `kappa stream --until-caught-up`.
#
# Usage: benches/event_time/run.sh [N] [K]   (holds /tmp/kappa-cpu.lock while timing)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-3000000}
K=${2:-1000}
DATA=benches/event_time/data
mkdir -p "$DATA"
cargo build --release --quiet
KAPPA=target/release/kappa
if [ ! -f "$DATA/events-$N.csv" ]; then
  python3 - "$N" "$K" > "$DATA/events-$N.csv" <<'PY'
import random, sys
n, k = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(42)
out = sys.stdout
out.write("key,ts\n")
for i in range(n):
    # Mostly in order; one in 50 up to 1.5 s late (within the allowed lateness).
    ts = i - (rng.randrange(1500) if rng.randrange(50) == 0 else 0)
    out.write(f"k{rng.randrange(k)},{ts}\n")
PY
fi
run() { # policy extra-args...
  local policy=$1; shift
  local dir; dir=$(mktemp -d)
  KAPPA_LOG_DIR=$dir/log $KAPPA log create events --partitions 2 >/dev/null
  KAPPA_LOG_DIR=$dir/log $KAPPA log produce events --key key --file "$DATA/events-$N.csv" --fsync never 2>/dev/null
  local stats
  stats=$( { flock /tmp/kappa-cpu.lock /usr/bin/time -f "%e %M" env KAPPA_LOG_DIR=$dir/log KAPPA_TABLE_DB=$dir/tables.db \
      $KAPPA stream window-agg -i input=events -p time=ts -p window=tumbling:1s -p key=key \
      --late "$policy" "$@" --until-caught-up --quiet --workers 2 >/dev/null 2>/dev/null; } 2>&1 )
  local rows
  rows=$(sqlite3 "$dir/tables.db" "select count(*) from windows" 2>/dev/null || echo "?")
  echo "| $policy $* | $(echo "$stats" | awk '{print $1}') s | $(echo "$stats" | awk '{printf "%.0f", $2/1024}') MB | $rows |"
  rm -rf "$dir"
}
echo "| policy | wall | peak RSS | windows in table |"
echo "|---|---|---|---|"
run correct
run drop --allowed-lateness 2s
