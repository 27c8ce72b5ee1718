"""Instruction counts of predict's parts outside planning, counts and the model (one problem,
four schedules, H100), in one callgrind run (frame22/cg/harness.py): predict, as_frame of its
columns and the short frame's steps, table.columns' other lines (its _shapes and _model
answered from a first call) and their helpers one by one, _columns with the same stubs, the
ratio columns. 200 calls a snippet; an empty first snippet in each measure() call (the first
dump counts some 37k instructions more).

    gcc -O2 -shared -fPIC -o /tmp/libcgmark.so experiments/sweep_speed/frame22/cg/cgmark.c
    PYTHONPATH=TREE PYTHONHASHSEED=0 setarch x86_64 -R valgrind --tool=callgrind \\
        --callgrind-out-file=/tmp/cg.out $(python -c 'import sys; print(sys.executable)') \\
        experiments/sweep_speed/frame23/snips.py
    python experiments/sweep_speed/frame22/cg/report.py /tmp/cg.out 200
"""

import os
import sys
from itertools import chain

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frame22", "cg"))

import numpy as np  # noqa: E402
from harness import measure  # noqa: E402

import iosim  # noqa: E402
from iosim.analysis import predict as P  # noqa: E402
from iosim.analysis import table  # noqa: E402
from iosim.analysis.table import predictable  # noqa: E402
from iosim.core.hardware import load  # noqa: E402
from iosim.core.rows import problem_fields  # noqa: E402
from iosim.model.backing import backing  # noqa: E402
from iosim.schedules import DEFAULT, plan  # noqa: E402

hw, four = load("h100"), ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cols, _ = P._columns(p, hw, four, DEFAULT, None)
plans = [predictable(plan(s, p, hw, DEFAULT, check=True), hw) for s in four]
temps = [table.Template(pl, hw, [p]) for pl in plans]
# (a first item: the first dump of a measure() call counts some 37k instructions more)
measure([("(first)", lambda: None), ("predict", lambda: P.predict(p, hw, four)),
         ("predict_rows", lambda: P.predict_rows(p, hw, four)), ("as_frame", lambda: table.as_frame(cols, dicts=True))])
kept, shapes, model = {}, table._shapes, table._model
table._shapes = lambda todo: kept.get("s") or kept.setdefault("s", shapes(todo))
table._model = lambda *a: kept.get("m") or kept.setdefault("m", model(*a))
table.columns(temps)
sh, md = kept["s"], kept["m"]
u = np.array([128] * 4)
tf, alu, dr, dw = cols["tensor_flops"], cols["alu_flops"], cols["dram_read_bytes"], cols["dram_write_bytes"]
items = [("(first)", lambda: None), ("other", lambda: table.columns(temps)),
         ("_columns stubbed", lambda: P._columns(p, hw, four, DEFAULT, None)),
         ("plans", lambda: [predictable(plan(s, p, hw, DEFAULT, check=True), hw) for s in four]),
         ("backing x4", lambda: [backing(pl, hw) for pl in plans]),
         ("_plan_columns", lambda: table._plan_columns(plans)),
         ("_counts", lambda: table._counts(sh, np.ones(4, np.int64), u, True)),
         ("_fields", lambda: table._fields([pl.problem for pl in plans])),
         ("problem_fields", lambda: problem_fields(p)),
         ("_fa_flops", lambda: table._fa_flops(temps, u, True, [0, 1, 2, 3], None)),
         ("_intensity", lambda: table._intensity(tf, alu, dr, dw)),
         ("_whole x2", lambda: (table._whole(md.dram_r), table._whole(md.dram_w))),
         ("templates", lambda: [table.Template(pl, hw, [pl.problem]) for pl in plans]),
         ("tensor_peak", lambda: hw.tensor_peak(p.dtype))]
vals = tuple(cols.values())
top = table._LAYOUTS[(tuple(cols), 4, table._str_mode(), tuple(map(type, vals)))]
kinds = (tuple(map(type, chain.from_iterable(top.lists(vals)))), tuple(map(table._DTYPE, top.arrays(vals))))
lay = top.layouts[kinds]
fast = table._pandas_blocks()
n = 4
arrays = [np.fromiter(chain.from_iterable([c if type(c) is list else c.tolist() for c in get(vals)]),
                      dtype, len(at) * n).reshape(len(at), n) if flat else np.array(get(vals), dtype)
          for dtype, get, flat, at in lay.blocks]
import pyarrow as pa  # noqa: E402

cells = pa.array(list(chain.from_iterable(lay.strs(vals))), pa.large_string())
items += [("frame key", lambda: (tuple(cols), n, table._str_mode(), tuple(map(type, vals)))),
          ("frame kinds", lambda: (tuple(map(type, chain.from_iterable(top.lists(vals)))),
                                   tuple(map(table._DTYPE, top.arrays(vals))))),
          ("frame arrays", lambda: [np.fromiter(chain.from_iterable([c if type(c) is list else c.tolist() for c in get(vals)]),
                                                dtype, len(at) * n).reshape(len(at), n) if flat else np.array(get(vals), dtype)
                                    for dtype, get, flat, at in lay.blocks]),
          ("frame cells", lambda: pa.array(list(chain.from_iterable(lay.strs(vals))), pa.large_string())),
          ("frame _built", lambda: table._built(fast, arrays, cells, n, lay, top))]
measure(items)
