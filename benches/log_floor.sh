#!/usr/bin/env bash
# The floor for the retained log benchmark (benches/log.rs) on this machine:
# a sequential write of the same amount of bytes with dd and conv=fdatasync
# (what "produce, no fsync" must approach: one flush at the end), and a warm
# sequential read with cat (what "consume (page cache)" is compared with).
#
# Run with: bash benches/log_floor.sh   (KAPPA_BENCH_DIR, KAPPA_BENCH_LOG_MB
# as for the bench; the default 1024 MiB matches its 1024 MB of values
# within the frames' overhead).
set -euo pipefail
dir=${KAPPA_BENCH_DIR:-${TMPDIR:-/tmp}}
mb=${KAPPA_BENCH_LOG_MB:-1024}
file=$(mktemp "$dir/kappa-log-floor.XXXXXX")
trap 'rm -f "$file"' EXIT

secs() { date +%s.%N; }
rate() { awk -v mb="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.2f s, %.1f MB/s\n", b - a, mb * 1.048576 / (b - a) }'; }

sync
a=$(secs)
dd if=/dev/zero of="$file" bs=1M count="$mb" conv=fdatasync status=none
b=$(secs)
echo "dd write ${mb} MiB, conv=fdatasync: $(rate "$mb" "$a" "$b")"

cat "$file" > /dev/null # warm the page cache
a=$(secs)
cat "$file" > /dev/null
b=$(secs)
echo "cat ${mb} MiB, warm page cache:     $(rate "$mb" "$a" "$b")"
