#!/usr/bin/env bash
# Nsight Compute on one forward of solution.py: stall reasons, the hottest SASS in context, loads by
# address space, shared-memory load wavefronts, and the kernel's duration under the profiler.
#   tools/ncu_kernel.sh [B [ROWS_PER_TILE [TAG]]]
# B defaults to 16384 and ROWS_PER_TILE to 128 (the tensor-core kernel, one tile per SM); B = 128 with
# ROWS_PER_TILE 0 profiles what the host picks (the cluster kernel). Extra nvcc flags (dev switches) come
# from VAE_EXTRA_CUDA_FLAGS as for any build of solution.py. Writes $OUT/TAG_details.txt,
# TAG_hotspots.txt and TAG_ncu.tgz (the report and the per-instruction CSV); TAG defaults to "ncu".
# Run from the repo root on the GPU machine (tools/gpu_session.sh ncu-wg:150); a first build of
# solution.py takes about a minute more.
set -uo pipefail
B=${1:-16384}; ROWS=${2:-128}; TAG=${3:-ncu}
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 2; }
W=$(mktemp -d)
cat > "$W/one_forward.py" <<PY
import torch, solution
m = solution.ModelNew(784, 256, 32).cuda()
x = torch.rand($B, 784, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
for _ in range(2):
    m(x, $ROWS)
for _ in range(200):   # warm the clock (ncu runs with --clock-control none)
    a @ a
m(x, $ROWS)
torch.cuda.synchronize()
PY
# the third forward is profiled (the first two warm the code and the caches); every vae_elbo kernel matches
PYTHONPATH=$PWD "$NCU" -f -o "$W/k" --kernel-name regex:vae_elbo_kernel --launch-skip 2 --launch-count 1 \
  --warp-sampling-interval 0 --clock-control none \
  --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
  --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
  --metrics "regex:^(smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__inst_executed_op_shared_ld\.sum|l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld\.sum|l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld\.sum)$" \
  python3 "$W/one_forward.py" > "$W/ncu_run.txt" 2>&1 || { tail -20 "$W/ncu_run.txt"; exit 1; }
"$NCU" -i "$W/k.ncu-rep" --page details > "$OUT/${TAG}_details.txt" 2>&1
"$NCU" -i "$W/k.ncu-rep" --page source --csv --print-source sass > "$W/src.csv" 2>&1
python3 tools/ncu_hotspots.py "$W/src.csv" > "$OUT/${TAG}_hotspots.txt"
# the device tool returns a few files per call: the report and the per-instruction CSV travel as one archive
tar czf "$OUT/${TAG}_ncu.tgz" -C "$W" k.ncu-rep src.csv one_forward.py ncu_run.txt && rm -rf "$W"
grep -E "vae_elbo_kernel|Duration|stalled_|op_shared_ld|mem_shared_op_ld|Warp Cycles Per Issued|Issued Ipc|Eligible Warps|No Eligible" "$OUT/${TAG}_details.txt"
head -60 "$OUT/${TAG}_hotspots.txt"
