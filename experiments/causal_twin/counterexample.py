"""A random draw (not CI's derandomized one) on which tests/test_timing.py's
test_causal_never_slower_than_its_twin fails, at 7318be2 and after session 24's changes alike
(predictions bit-identical): fa1's backward, b2 h32 N100 d256 bf16, H100, is predicted slower
causal than not, past the test's 1% and mask allowance. Left for the model's issue.

    PYTHONPATH=$PWD python experiments/causal_twin/counterexample.py > experiments/causal_twin/counterexample.log
"""

import iosim
from iosim.analysis.predict import row
from iosim.core.hardware import load
from iosim.schedules import plan

hw = load("h100-sxm5-80gb")
p = iosim.Problem(batch=2, heads=32, seqlen_q=100, head_dim=256, direction="bwd")
causal, plain = (row(plan("fa1", p.model_copy(update={"causal": c}), hw), hw)["time_pred_ms"]
                 for c in (True, False))
print(f"fa1 bwd b2 h32 N100 d256 bf16 on {hw.name}: causal {causal!r} ms, not causal {plain!r} ms, "
      f"ratio {causal / plain:.4f}")
