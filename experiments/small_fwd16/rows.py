"""Per (hw, schedule, direction): rows, MAPE, mean and worst error (percent) of today's model on the small block
(`small`: the validate-small-queued files) or the validate summary's nine files (`main`), as
`iosim validate` computes them; optional second argument: a pickle of every row. usage: rows.py small|main [rows.pkl]"""
import sys

import pandas as pd

from iosim.analysis.accuracy import join
from iosim.analysis.validate import repredict
from iosim.core.rows import MEASURED_NEEDS, read_rows

SETS = {"small": ["experiments/small_new/h100/flush10/measured_small_rq1.csv",
                  "experiments/waves/h100/flush10/measured_waves_rq.csv"],
        "main": """experiments/fwd_grid/h100/measured.csv experiments/new_shapes/h100/measured_new.csv
    experiments/fwd_ncu/h100/measured_ncu.csv experiments/fa3/h100/measured_fa3.csv
    experiments/bwd_grid/h100/measured_bwd.csv experiments/fwd_grid/h200/measured.csv
    experiments/fwd_ncu/h200/measured_ncu.csv experiments/fa3/h200/measured_fa3.csv
    experiments/bwd_grid/h200/measured_bwd.csv""".split()}
which = sys.argv[1]
paths = SETS[which]
m = pd.concat([read_rows(p, MEASURED_NEEDS).assign(src=p.split('/')[1]) for p in paths], ignore_index=True)
pred = repredict(m)
j = join(pred, m)
t = j.time_queued_ms.where(j.time_queued_ms.notna(), j.time_ms) if 'time_queued_ms' in j else j.time_ms
j = j.assign(meas=t, err=(j.time_pred_ms / t - 1) * 100)
j = j[(j.status == 'ok') & (j.meas > 0)]
if len(sys.argv) > 2 and sys.argv[2] != "/dev/null":
    j.to_pickle(sys.argv[2])
for (h, s, d), g in j.groupby(['hw', 'schedule', 'direction']):
    print(f"{h[:4]} {s:5} {d} {len(g):3d} mape {g.err.abs().mean():5.2f} mean {g.err.mean():6.2f} worst {g.err.abs().max():5.1f}")
