# The GPU machine's environment for every experiments/*/run.sh; source it from the repository
# root with the experiment's name:   . experiments/gpu_env.sh NAME
# - installs the carried wheels (.whl/: pydantic is not in the GPU image) and puts the repo on
#   PYTHONPATH; `iosim` on PATH runs the CLI of this tree (timeout can run it);
# - HW: the hardware profile whose gpu_name is exactly the name nvidia-smi reports
#   (hwprofiles/*.toml, calibrated ones left out), GPU: its short name (h100, h200, a100);
#   any other GPU stops the run here: its rows would be filed under the wrong profile;
# - DIR: where results go, ${OUT:-experiments/NAME}/GPU, with gpu.txt (nvidia-smi, date).
[ -n "$1" ] || { echo "error: usage: . experiments/gpu_env.sh NAME (an experiments/ folder)" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
mkdir -p /tmp/site/bin
printf '#!/bin/sh\nexec python3 -c "from iosim.cli import main; main()" "$@"\n' > /tmp/site/bin/iosim
chmod +x /tmp/site/bin/iosim
export PATH="/tmp/site/bin:$PATH"

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
profiles=$(grep -lxF "gpu_name = \"$gpu_name\"" hwprofiles/*.toml | grep -v '\.calibrated\.toml$')
if [ "$(echo "$profiles" | grep -c .)" != 1 ]; then
  echo "error: no single hardware profile has gpu_name = \"$gpu_name\" (found: ${profiles:-none});" \
       "known: $(awk -F'"' '/^gpu_name = /{print $2; nextfile}' hwprofiles/*.toml | sort -u | paste -sd,)" >&2
  exit 2
fi
HW=$(basename "$profiles" .toml)
GPU=${HW%%-*}
DIR=${OUT:-experiments/$1}/$GPU
mkdir -p "$DIR"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv; } \
  | tee "$DIR/gpu.txt"
export HW GPU DIR
