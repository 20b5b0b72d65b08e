#!/usr/bin/env bash
# Nsight Compute on one forward of solution.py's tensor-core kernel (vae_elbo_kernel_wg) at B rows
# (default 16384: one 128-row tile per SM): stall reasons, the hottest SASS, loads by address space.
# Writes $OUT/details.txt, hotspots.txt and ncu_raw.tgz (wg.ncu-rep, src.csv). Run from the repo root on the GPU machine
# (tools/gpu_session.sh ncu-wg:150); a first build of solution.py takes about a minute more.
set -uo pipefail
B=${1:-16384}
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 2; }
cat > "$OUT/one_forward.py" <<PY
import torch, solution
m = solution.ModelNew(784, 256, 32).cuda()
x = torch.rand($B, 784, device="cuda")
for _ in range(2):
    m(x, 128)
torch.cuda.synchronize()
PY
PYTHONPATH=$PWD "$NCU" -f -o "$OUT/wg" --kernel-name regex:vae_elbo_kernel_wg --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 "$OUT/one_forward.py" > "$OUT/ncu_run.txt" 2>&1 || { tail -20 "$OUT/ncu_run.txt"; exit 1; }
"$NCU" -i "$OUT/wg.ncu-rep" --page details > "$OUT/details.txt" 2>&1
"$NCU" -i "$OUT/wg.ncu-rep" --page source --csv --print-source sass > "$OUT/src.csv" 2>&1
python3 tools/ncu_hotspots.py "$OUT/src.csv" > "$OUT/hotspots.txt"
# the device tool returns a few files per call: the report and the per-instruction CSV travel as one archive
tar czf "$OUT/ncu_raw.tgz" -C "$OUT" wg.ncu-rep src.csv one_forward.py ncu_run.txt && rm -f "$OUT/wg.ncu-rep" "$OUT/src.csv" "$OUT/one_forward.py" "$OUT/ncu_run.txt"
grep -E "stalled_|Warp Cycles Per Issued|Issued Ipc|Eligible Warps|No Eligible" "$OUT/details.txt"
head -60 "$OUT/hotspots.txt"
