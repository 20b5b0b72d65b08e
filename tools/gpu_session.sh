#!/usr/bin/env bash
# One device call: run the named stages in order, each under its own time limit, logs under $OUT,
# a summary table last. Stages: test gpu-tests copy solution-tests check bench sweep profile protocol adversarial-gpu.
# The full suite (`test`) overran 9.5 min on the H200 (each harness subprocess starts Python and torch
# there in several seconds); `gpu-tests` runs only the gpu-marked tests, 6 at a time (pytest-xdist is
# installed there), after building solution.py once so the workers find it cached.
# Example: tools/gpu_session.sh check:150 bench:150 profile:60
set -uo pipefail
OUT="${OUT:-/tmp/gpu_out}"; mkdir -p "$OUT" results
export PYTHONUNBUFFERED=1
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
    gpu-tests) run_stage gpu-build 200 python3 -c "import solution"
              run_stage gpu-tests "$limit" python3 -m pytest -q -rs -m gpu -n 6 tests ;;
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
echo "=== summary"; printf '%s\n' "${SUMMARY[@]}"
