#!/usr/bin/env bash
# kernels/fa3.cu under compute-sanitizer (memcheck, racecheck, synccheck; fa3_fwd only) on small
# ragged shapes (one per consumer layout: d=64 three warpgroups, d=128 ping-pong with GQA,
# d=256 two stages of 80 keys), then one `iosim bench --ncu` point per causal mode.
# On the GPU machine, from the repo root, with the wheels in .whl/:  bash experiments/fa3_sanitize/run.sh
set -o pipefail
. experiments/gpu_env.sh fa3_sanitize
points=(
  '{"schedule":"fa3","hw":"'"$HW"'","seed":1,"batch":1,"heads":2,"seqlen_q":300,"head_dim":64,"causal":true}'
  '{"schedule":"fa3","hw":"'"$HW"'","seed":2,"batch":1,"heads":4,"kv_heads":2,"seqlen_q":333,"head_dim":128,"causal":true}'
  '{"schedule":"fa3","hw":"'"$HW"'","seed":3,"batch":2,"heads":1,"seqlen_q":200,"seqlen_k":250,"head_dim":256,"causal":false}'
)
# --report-api-errors no: cuda-bindings probes driver entry points this driver lacks
# (cuGetProcAddress_v2 -> CUDA_ERROR_INVALID_VALUE, 34 of them on driver 580.159), host-side
# noise that memcheck otherwise counts as errors; device-side checks are unaffected.
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool "$tool" --report-api-errors no --kernel-name kns=fa3_fwd \
    --error-exitcode 3 python3 -c 'import sys; from iosim.gpu.once import main; [main(a) for a in sys.argv[1:]]' \
    "${points[@]}" 2>&1 | tee "$DIR/sanitize_$tool.log" | tail -3
  echo "$tool exit: $?" | tee -a "$DIR/sanitize_$tool.log"
done
timeout 240 iosim bench --schedule fa3 --seqlen 4096 \
  --head-dim 128 --causal both --dtype bf16 --ncu -o "$DIR/measured_fa3_ncu.csv" 2>&1 | tr '\r' '\n' | tail -2
python3 -c "
import pandas as pd; d = pd.read_csv('$DIR/measured_fa3_ncu.csv')
print(d[['causal','tflops','dram_read_bytes','dram_read_bytes_ncu','dram_write_bytes','dram_write_bytes_ncu','tensor_inst_ncu','ncu_status']].to_string())"
