"""Instructions per call of iosim.predict and predict_rows (one problem, four schedules, H100),
the record problem (b4 h32 N4096 d128) and its causal twin, in one callgrind run
(frame22/cg/harness.py: the collector off while counting), 100 calls a snippet.

    PYTHONPATH=TREE PYTHONHASHSEED=0 setarch x86_64 -R valgrind --tool=callgrind \\
        --callgrind-out-file=/tmp/rc.out $(python -c 'import sys; print(sys.executable)') \\
        experiments/sweep_speed/frame23/record_causal.py
    python experiments/sweep_speed/frame22/cg/report.py /tmp/rc.out 100
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frame22", "cg"))

from harness import measure  # noqa: E402

import iosim  # noqa: E402
from iosim.analysis import predict as P  # noqa: E402
from iosim.core.hardware import load  # noqa: E402

hw, four = load("h100"), ["naive", "fa1", "fa2", "fa3"]
rec = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cau = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=True)
measure([("(first)", lambda: None), ("record", lambda: P.predict(rec, hw, four)), ("causal", lambda: P.predict(cau, hw, four)),
         ("record rows", lambda: P.predict_rows(rec, hw, four)), ("causal rows", lambda: P.predict_rows(cau, hw, four))], 100)
