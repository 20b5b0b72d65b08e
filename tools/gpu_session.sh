#!/usr/bin/env bash
# One device call: run the named stages in order, each under its own time limit, logs under $OUT,
# a summary table last. Stages: make-test build all-tests timing-tests strict-tests solution-tests
# adversarial-gpu make-check make-bench goal-table check bench copy sweep profile protocol kernel-dev wgmma-probe hgmma-peak wg-ladder coop-cluster wg-dev
# ncu-wg (tools/ncu_kernel.sh: Nsight Compute stall reasons and hot SASS of the tensor-core kernel), timeline
# (tools/timeline.py at B = 1 and 128: every cluster-kernel block's phase ends on one clock), goal-table (issue 10's
# side-by-side table at B = 1, 128, 1024, 2048 with the goals' verdicts: tools/goal_table.py, printed last).
# `make-test` is what a newcomer runs (goal: <= 5 min on the H200). `all-tests` is its first half with
# the build first and 8 processes: the whole suite in parallel (pytest.ini's addopts) except the
# `gpu_timing` cases, whose verdicts compare timings and want a quiet machine: `timing-tests` runs
# those alone, one after another (make test's second half). Both log every adversarial case to
# $OUT/cases.jsonl; the summary ends with the case -> verdict table.
# `make-check` is timed twice when named twice: the first builds solution.py unless it is cached.
# `kernel-dev` is tools/kernel_dev.py --variants prof --eps (working tree vs .old/solution_prev.py: carry .old);
# `wgmma-probe` is tools/wgmma_probe.py, `hgmma-peak` tools/hgmma_peak.py, `wg-ladder` tools/wg_ladder.py, `coop-cluster`
# tools/coop_cluster_probe.py (issue 11). Extensions build into build/torch_extensions, so a later
# stage (make check after kernel-dev, say) reuses what an earlier one built.
# Example: tools/gpu_session.sh wgmma-probe:240 kernel-dev:300 make-check:120 make-check:60 make-test:420
set -uo pipefail
OUT="${OUT:-/tmp/gpu_out}"; mkdir -p "$OUT" results
export PYTHONUNBUFFERED=1 ADVERSARIAL_LOG="$OUT/cases.jsonl"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$PWD/build/torch_extensions}"
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
    make-test) run_stage make-test "$limit" make test ;;
    all-tests) run_stage gpu-build 200 python3 -c "import solution"
              run_stage all-tests "$limit" python3 -m pytest -q -rs -n 8 --durations=12 tests ;;
    timing-tests) run_stage timing-tests "$limit" python3 -m pytest -q -rs -m gpu_timing -n 0 --durations=12 tests ;;
    build)    run_stage build "$limit" python3 -c "import solution" ;;
    strict-tests) run_stage strict-tests "$limit" python3 -m pytest -q -rs -n 4 tests/test_adversarial.py -k "strict and cuda" ;;
    make-check) run_stage make-check "$limit" make check ;;
    make-bench) run_stage make-bench "$limit" make bench ;;
    solution-tests) run_stage solution-tests "$limit" python3 -m pytest -q -rs tests/test_solution.py ;;
    check)    run_stage check "$limit" python3 -m harness check --json results/check.json ;;
    bench)    run_stage bench "$limit" python3 -m harness bench --json results/bench.json ;;
    sweep)    run_stage sweep "$limit" python3 -m harness bench --skip compile \
                --sweep batch_size=1,32,128,1024,4096,16384,65536 ;;
    profile)  run_stage profile "$limit" python3 -m harness profile --json results/profile.json ;;
    protocol) run_stage protocol "$limit" python3 -m harness check --protocol kernelbench --trials 5 --batch-sizes 128 ;;
    adversarial-gpu) run_stage adversarial-gpu "$limit" python3 -m pytest -q -rs -m gpu -n 0 tests/test_adversarial.py \
                -k "empty_outputs or stale_empty or side_stream or device_assert or patches_harness" ;;
    copy)     run_stage copy-check "$limit" python3 -m harness check --solution tests/solutions/correct/eager_copy.py
              run_stage copy-bench "$limit" python3 -m harness bench --solution tests/solutions/correct/eager_copy.py \
                --skip compile,compile-ro ;;
    kernel-dev) run_stage kernel-dev "$limit" python3 tools/kernel_dev.py --variants prof --eps ;;
    goal-table) run_stage goal-sweep "$limit" python3 -m harness bench --skip compile,compile-ro \
                --sweep batch_size=1,128,1024,2048 --out-dir results
              for b in 1 128 1024 2048; do run_stage goal-profile-$b 60 python3 -m harness profile --quiet \
                --batch-size $b --json results/profile_$b.json; done
              python3 tools/goal_table.py results > "$OUT/goal-table.md" 2>&1 ;;
    timeline) run_stage timeline "$limit" python3 tools/timeline.py --sizes 1,128 ;;
    wgmma-probe) run_stage wgmma-probe "$limit" python3 tools/wgmma_probe.py ;;
    hgmma-peak) run_stage hgmma-peak "$limit" python3 tools/hgmma_peak.py ;;
    wg-ladder) run_stage wg-ladder "$limit" python3 tools/wg_ladder.py ;;
    coop-cluster) run_stage coop-cluster "$limit" python3 tools/coop_cluster_probe.py ;;
    wg-dev)   run_stage wg-smoke 90 python3 -c "import torch, solution; m = solution.ModelNew(784, 256, 32).cuda(); \
                x = torch.rand(300, 784, device='cuda'); m(x, 128); torch.cuda.synchronize(); print('wg kernel ran')"
              run_stage wg-dev "$limit" python3 tools/kernel_dev.py --variants prof,wg_base,wg_group4_2,wg_no_mma_load ;;
    ncu-wg)   run_stage build 200 python3 -c "import solution"
              run_stage ncu-wg "$limit" bash tools/ncu_kernel.sh ;;
    *) echo "unknown stage $stage" ;;
  esac
done
tar czf "$OUT/results.tgz" results 2>/dev/null
cat "$OUT/env.log"
[ -f "$OUT/cases.jsonl" ] && python3 tools/verdict_table.py "$OUT/cases.jsonl" > "$OUT/cases.md"
for s in wgmma-probe hgmma-peak wg-ladder coop-cluster kernel-dev wg-dev ncu-wg timeline; do [ -f "$OUT/$s.log" ] && { echo "=== $s (tail)"; tail -22 "$OUT/$s.log"; }; done
for log in "$OUT"/*.log; do grep -E "^[0-9]+ (passed|failed)|^(FAILED|ERROR) " "$log" | sed "s|^|$(basename "$log"): |"; done
[ -f "$OUT/goal-table.md" ] && { echo "=== goal table"; cat "$OUT/goal-table.md"; }
echo "=== summary"; printf '%s\n' "${SUMMARY[@]}"
