# Source on the GPU machine: carried wheels (pydantic is not in its image), the repo on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
iosim() { python3 -c "from iosim.cli import main; main()" "$@"; }
