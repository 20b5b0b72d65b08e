#!/usr/bin/env bash
# One device call: run the named stages in order, each under its own time limit, logs under $OUT,
# a summary table last. Stages: test gpu-tests all-tests timing-tests copy solution-tests check bench
# make-check make-bench sweep profile protocol adversarial-gpu.
# The full suite run sequentially (`test`) overran 9.5 min on the H200 (each harness subprocess starts
# Python and torch there in several seconds). `all-tests` builds solution.py once, then runs the whole
# suite 8 at a time (pytest-xdist is installed there) except the GPU bench cases, whose side-stream rule
# compares timings and wants a quiet machine: `timing-tests` runs those alone, one after another.
# Both log every adversarial case to $OUT/cases.jsonl; the summary ends with the case -> verdict table.
# Example: tools/gpu_session.sh all-tests:420 timing-tests:150
set -uo pipefail
OUT="${OUT:-/tmp/gpu_out}"; mkdir -p "$OUT" results
export PYTHONUNBUFFERED=1 ADVERSARIAL_LOG="$OUT/cases.jsonl"
TIMING='(bench and cuda) or side_stream_is'  # the adversarial bench cases on the GPU
declare -a SUMMARY
run_stage() {  # name, limit_s, command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name: $*" >>"$OUT/$name.log"
  timeout -k 5 "$limit" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-16s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$*")")
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/env.log" 2>&1
for spec in "$@"; do
  stage=${spec%%:*}; limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=600
  case "$stage" in
    test)     run_stage test "$limit" python3 -m pytest -q -rs --durations=12 ;;
    all-tests) run_stage gpu-build 200 python3 -c "import solution"
              run_stage all-tests "$limit" python3 -m pytest -q -rs -n 8 -k "not ($TIMING)" tests ;;
    timing-tests) run_stage timing-tests "$limit" python3 -m pytest -q -rs tests/test_adversarial.py -k "$TIMING" ;;
    build)    run_stage build "$limit" python3 -c "import solution" ;;
    strict-tests) run_stage strict-tests "$limit" python3 -m pytest -q -rs -n 4 tests/test_adversarial.py -k "strict and cuda and not ($TIMING)" ;;
    make-check) run_stage make-check "$limit" make check ;;
    make-bench) run_stage make-bench "$limit" make bench ;;
    solution-tests) run_stage solution-tests "$limit" python3 -m pytest -q -rs tests/test_solution.py ;;
    check)    run_stage check "$limit" python3 -m harness check --json results/check.json ;;
    bench)    run_stage bench "$limit" python3 -m harness bench --json results/bench.json ;;
    sweep)    run_stage sweep "$limit" python3 -m harness bench --skip compile \
                --sweep batch_size=1,32,128,1024,4096,16384,65536 ;;
    profile)  run_stage profile "$limit" python3 -m harness profile --json results/profile.json ;;
    protocol) run_stage protocol "$limit" python3 -m harness check --protocol kernelbench --trials 5 --batch-sizes 128 ;;
    adversarial-gpu) run_stage adversarial-gpu "$limit" python3 -m pytest -q -rs tests/test_adversarial.py \
                -k "empty_outputs or stale_empty or side_stream or device_assert" ;;
    copy)     run_stage copy-check "$limit" python3 -m harness check --solution tests/solutions/eager_copy.py
              run_stage copy-bench "$limit" python3 -m harness bench --solution tests/solutions/eager_copy.py \
                --skip compile,compile-ro ;;
    *) echo "unknown stage $stage" ;;
  esac
done
tar czf "$OUT/results.tgz" results 2>/dev/null
cat "$OUT/env.log"
[ -f "$OUT/cases.jsonl" ] && python3 tools/verdict_table.py "$OUT/cases.jsonl" > "$OUT/cases.md"
for log in "$OUT"/*.log; do grep -E "^[0-9]+ (passed|failed)|^(FAILED|ERROR) " "$log" | sed "s|^|$(basename "$log"): |"; done
echo "=== summary"; printf '%s\n' "${SUMMARY[@]}"
