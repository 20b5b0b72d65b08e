#!/usr/bin/env bash
# Issue 13 on a GPU machine: export both formats, build, then the exported solutions against this
# harness and the reproduced KernelBench and GPU MODE procedures, and their speed beside solution.py.
# Logs under $OUT (default /tmp/export_out), a summary and the speed table last.
#   tools/export_check.sh                       # every stage that fits in $BUDGET (570) seconds
#   tools/export_check.sh build speed kb-check  # some stages; name:seconds sets a stage's limit
# A stage that no longer fits is listed as not run, with the command that runs it.
# Stages: build speed kb-check gm-check kb-bench gm-bench pytest. The export itself always runs
# first (files only, a second); builds are cached under build/torch_extensions (git-ignored), so
# a later call on the same machine does not compile again.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/export_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$PWD/build/torch_extensions}"
export KB=results/export/kernelbench GM=results/export/gpumode
SIZES=1,7,127,129,1000,4096,16384
declare -a SUMMARY
BUDGET="${BUDGET:-570}"  # seconds for the whole call: a device command is stopped at 600 s, the summary must print
run_stage() {  # name, limit_s, pattern of the verdict lines to show, command...
  local name=$1 limit=$2 pattern=$3; shift 3
  local t0=$SECONDS left=$((BUDGET - SECONDS))
  if [ "$left" -lt 30 ]; then SUMMARY+=("$(printf '%-9s not run: out of time (run: tools/export_check.sh %s)' "$name" "$name")"); return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name: $*" >"$OUT/$name.log"
  timeout -k 5 "$limit" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-9s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E "$pattern" "$OUT/$name.log" | tr -s ' ' | tr '\n' '|' | cut -c1-230)")")
}
# the three extensions at once: solution.py, the KernelBench export, the GPU MODE export
BUILD='python3 -c "import solution" & a=$!
python3 -c "import sys; sys.path.insert(0, \"$KB\"); import solution" & b=$!
(cd "$GM" && python3 -c "import submission") & c=$!
wait $a && wait $b && wait $c && echo "built: solution.py, $KB/solution.py, $GM/submission.py"'
rm -rf results/export
python3 -m harness export --to kernelbench "$KB" >"$OUT/export.log" 2>&1 &&
  python3 -m harness export --to gpumode "$GM" >>"$OUT/export.log" 2>&1 || { cat "$OUT/export.log"; exit 3; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >"$OUT/env.log" 2>&1
[ $# -eq 0 ] && set -- build:300 speed:150 kb-check:240 gm-check:240 gm-bench:300 kb-bench:240 pytest:400
for spec in "$@"; do
  stage=${spec%%:*}; limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=300
  case "$stage" in
    build)    run_stage build "$limit" "^built|Error" bash -c "$BUILD" ;;
    speed)    run_stage speed "$limit" "^slowest" python3 tools/export_speed.py --kernelbench "$KB" --gpumode "$GM" ;;
    kb-check) run_stage kb-check "$limit" "^(PASS|FAIL|ERROR)|^correctness" python3 -m harness check \
                --solution "$KB/solution.py" --reference "$KB/reference.py" --batch-sizes "$SIZES" --protocol kernelbench ;;
    gm-check) run_stage gm-check "$limit" "^(PASS|FAIL|ERROR)|^test mode" python3 -m harness check \
                --solution "$GM/submission.py" --reference "$GM/reference.py" --batch-sizes "$SIZES" --protocol gpumode ;;
    kb-bench) run_stage kb-bench "$limit" "^(PASS|FAIL|ERROR)|^speedup|^solution time" python3 -m harness bench \
                --solution "$KB/solution.py" --reference "$KB/reference.py" --skip compile,compile-ro --protocol kernelbench ;;
    gm-bench) run_stage gm-bench "$limit" "^(PASS|FAIL|ERROR)|^(test|benchmark|leaderboard) mode|^score" \
                python3 -m harness bench --solution "$GM/submission.py" --reference "$GM/reference.py" \
                --skip compile,compile-ro --protocol gpumode ;;
    pytest)   run_stage pytest "$limit" "passed|failed" python3 -m pytest -q -rs tests/test_export.py ;;
    *) echo "unknown stage $stage (build speed kb-check gm-check kb-bench gm-bench pytest)" ;;
  esac
done
echo "=== $(cat "$OUT/env.log"); logs in $OUT"
cat "$OUT/export.log" | grep -E "^(export|note)"
for f in kb-check gm-check kb-bench gm-bench; do
  [ -f "$OUT/$f.log" ] && sed -n '/procedure, reproduced/,$p' "$OUT/$f.log" | sed "s|^|$f: |" | head -30
done
printf '%s\n' "=== summary" "${SUMMARY[@]}"
[ -f "$OUT/speed.log" ] && { echo "=== speed (tools/export_speed.py)"; tail -n 10 "$OUT/speed.log"; }
