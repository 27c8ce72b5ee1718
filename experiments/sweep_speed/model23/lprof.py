"""Line profile of model23's functions over predict of the record problem (and causal: arg
`causal`): PYTHONPATH=$PWD /tmp/lpenv/bin/python experiments/sweep_speed/model23/lprof.py [causal]"""
import io
import sys

from line_profiler import LineProfiler

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.model import memory, timing

hw = load("h100")
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal="causal" in sys.argv)
four = ["naive", "fa1", "fa2", "fa3"]
for _ in range(50):
    P.predict(p, hw, four)
lp = LineProfiler()
for f in (table._model, table._rows_of, memory.dram_arrays, memory.hit_fraction, memory.refetched,
          timing.facts_table, timing.predict_batch, timing._busy, timing._shortest, timing._fluid,
          timing._instructions, timing._rates_of, timing.roofline_table, timing._chosen,
          timing._exact, timing._lower):
    lp.add_function(f)
lp.enable_by_count()
for _ in range(300):
    P.predict(p, hw, four)
lp.disable_by_count()
s = io.StringIO()
lp.print_stats(stream=s, output_unit=1e-6)
print(s.getvalue())
