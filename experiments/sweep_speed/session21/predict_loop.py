"""3,000 calls of iosim.predict on the record problem (b4 h32 N4096 d128, four schedules): the
loop `perf record` profiled for perf.log (its command is that file's first line)."""

import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load

hw = load("h100")
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
for _ in range(3000):
    P.predict(p, hw, ["naive", "fa1", "fa2", "fa3"])
