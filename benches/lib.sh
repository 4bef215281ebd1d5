# Shared helpers of the benchmark scripts (benches/*/run.sh): timing, peak
# memory, the machine's CPU lock, results and ratios. Source it after setting
# LOGS (where each run's stdout/stderr go) and BENCH_TMP (scratch space):
#
#   . "$ROOT/benches/lib.sh"
#   bench NAME CMD...        # RUNS timed runs, the best recorded in $BENCH_TMP/results.tsv
#   timed NAME CMD...        # one timed run, appended to $BENCH_TMP/NAME.runs
#   best NAME                # "wall cpu rss_kib" of NAME's best run
#   ratio A B                # "2.71×" (or "—" when either is missing)
#
# Every timed run goes through /usr/bin/time (user+sys CPU and peak RSS) and
# holds the CPU lock /tmp/kappa-cpu.lock, so that two benchmarks on the
# 2-core machine never time each other; waiting for the lock is not timed.
# results.tsv has one line per measurement:
#   name, best wall s, all wall s (space separated), cpu s of the best, max RSS KiB of the best, status (ok|FAILED)

: "${LOGS:?set LOGS before sourcing benches/lib.sh}"
: "${BENCH_TMP:?set BENCH_TMP before sourcing benches/lib.sh}"
RUNS=${RUNS:-3}
CPU_LOCK=${CPU_LOCK:-/tmp/kappa-cpu.lock}
mkdir -p "$LOGS" "$BENCH_TMP"
touch "$BENCH_TMP/results.tsv"

say() { printf '== %s\n' "$*" >&2; }

if ! /usr/bin/time -f '%M' -o "$BENCH_TMP/probe" true 2>/dev/null; then
    echo "error: /usr/bin/time is needed for CPU time and peak memory (apt-get install time)" >&2
    exit 1
fi

# timed NAME CMD...: one run of CMD (after running $PRE untimed, if set).
timed() {
    local name=$1; shift
    local rc=0
    if [[ -n ${PRE:-} ]]; then eval "$PRE"; fi
    # The wall time is /usr/bin/time's, taken inside the lock.
    flock "$CPU_LOCK" /usr/bin/time -f '%e %U %S %M' -o "$BENCH_TMP/rusage" "$@" \
        >"$LOGS/$name.stdout" 2>"$LOGS/$name.stderr" || rc=$?
    if ((rc != 0)); then
        echo "   $name FAILED (exit $rc): $*" >&2
        tail -n 5 "$LOGS/$name.stderr" | sed 's/^/     /' >&2
        return 1
    fi
    local dt u s rss cpu
    read -r dt u s rss < <(tail -n 1 "$BENCH_TMP/rusage")
    cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
    echo "$dt $cpu $rss" >>"$BENCH_TMP/$name.runs"
    echo "   $name: ${dt}s  cpu ${cpu}s  maxrss $((rss / 1024)) MiB  (load $(cut -d' ' -f1 /proc/loadavg))" >&2
}

# bench NAME CMD...: RUNS timed runs; the best goes to results.tsv.
bench() {
    local name=$1; shift
    local i status=ok
    rm -f "$BENCH_TMP/$name.runs"
    say "timing $name: $*"
    for ((i = 1; i <= RUNS; i++)); do
        timed "$name" "$@" || { status=FAILED; break; }
    done
    record "$name" "$status"
}

# record NAME STATUS: the best of $BENCH_TMP/NAME.runs into results.tsv.
record() {
    local name=$1 status=$2
    if [[ $status == ok && -s $BENCH_TMP/$name.runs ]]; then
        local all
        all=$(awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }' "$BENCH_TMP/$name.runs")
        sort -n -k1,1 "$BENCH_TMP/$name.runs" | head -n 1 | {
            read -r wall cpu rss
            printf '%s\t%s\t%s\t%s\t%s\tok\n' "$name" "$wall" "$all" "$cpu" "$rss"
        } >>"$BENCH_TMP/results.tsv"
    else
        printf '%s\t\t\t\t\tFAILED\n' "$name" >>"$BENCH_TMP/results.tsv"
    fi
}

# best NAME: "wall cpu rss_kib" of NAME's best run (empty if it failed).
best() {
    awk -F'\t' -v n="$1" '$1 == n && $6 == "ok" { print $2, $4, $5 }' "$BENCH_TMP/results.tsv" | tail -n 1
}

# ratio A B: A / B as "2.71×", "—" when either is empty or B is zero.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "—"; else printf "%.2f×\n", a / b }'
}

# machine: "N cores (MODEL), X GiB RAM" for report headers.
machine() {
    local model mem
    model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
    mem=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
    echo "$(nproc) cores (${model:-unknown}), $mem GiB RAM"
}

# commit_id: the short commit of the tree being measured, "(dirty)" if modified.
commit_id() {
    local root=$1 id
    id=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "no commit")
    if [[ -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]]; then id+=" (dirty)"; fi
    echo "$id"
}
