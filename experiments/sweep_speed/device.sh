#!/bin/bash
# sweep_speed.py on the GPU machine's CPU, pinned to two cores (taskset): an idle machine,
# where this repository's 2-core machine is shared and its wall clocks move by tens of percent.
# Here, before the call (the previous version, extracted; the GPU machine's copy has no .git):
#   rm -rf .base13 && mkdir .base13 && git archive 94797ab iosim hwprofiles kernels pyproject.toml \
#     | tar -x -C .base13 && echo 94797ab > .base13/.commit
# (or in the ignored .gl/: BASE_TREE=.gl/base13) then, with carry [".whl", ".base13"] (or ".gl"):   OUT=$OUT COMMIT=$(git rev-parse --short HEAD) bash experiments/sweep_speed/device.sh
set -u
# the carried wheels (pydantic is not in the image) on every interpreter's path: sweep_speed.py
# sets PYTHONPATH to each version's tree, so a .pth file in site-packages names them
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
python3 -c "import site; print(site.getsitepackages()[0])" | xargs -I{} sh -c 'echo /tmp/site > {}/iosim_wheels.pth' || exit 1
python3 -c "import pydantic; print('pydantic', pydantic.VERSION)" || exit 1
mkdir -p "$OUT"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name --format=csv,noheader; lscpu | grep -m1 'Model name'; } > "$OUT/machine.txt"
timeout 560 taskset -c 0,1 python3 experiments/sweep_speed/sweep_speed.py --repeat 3 \
  --base-tree "${BASE_TREE:-.base13}" --commit "$COMMIT" --out "$OUT/sweep_speed.json" 2>&1 | tee "$OUT/sweep_speed.log"
