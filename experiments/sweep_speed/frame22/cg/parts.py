"""Instruction counts of predict's parts (one problem, four schedules) in one callgrind run
(harness.py): predict; as_frame of its columns; and, with _shapes and _model answered from a
first call, columns' other lines ("other"), _columns and the Plans. 200 calls a part.

    gcc -O2 -shared -fPIC -o /tmp/libcgmark.so experiments/sweep_speed/frame22/cg/cgmark.c
    PYTHONPATH=TREE PYTHONHASHSEED=0 setarch x86_64 -R valgrind --tool=callgrind \\
        --callgrind-out-file=/tmp/cg.out $(python -c 'import sys; print(sys.executable)') \\
        experiments/sweep_speed/frame22/cg/parts.py
    python experiments/sweep_speed/frame22/cg/report.py /tmp/cg.out 200
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from harness import measure  # noqa: E402

import iosim  # noqa: E402
from iosim.analysis import predict as P  # noqa: E402
from iosim.analysis import table  # noqa: E402
from iosim.analysis.table import predictable  # noqa: E402
from iosim.core.hardware import load  # noqa: E402
from iosim.schedules import DEFAULT, plan  # noqa: E402

hw, four = load("h100"), ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cols, _ = P._columns(p, hw, four, DEFAULT, None)
temps = [table.Template(predictable(plan(s, p, hw, DEFAULT, check=True), hw), hw, [p]) for s in four]
measure([("predict", lambda: P.predict(p, hw, four)), ("as_frame", lambda: table.as_frame(cols, dicts=True))])
kept, shapes, model = {}, table._shapes, table._model
table._shapes = lambda todo: kept.get("s") or kept.setdefault("s", shapes(todo))
table._model = lambda *a: kept.get("m") or kept.setdefault("m", model(*a))
measure([("other", lambda: table.columns(temps)), ("_columns stubbed", lambda: P._columns(p, hw, four, DEFAULT, None)),
         ("plans", lambda: [predictable(plan(s, p, hw, DEFAULT, check=True), hw) for s in four])])
