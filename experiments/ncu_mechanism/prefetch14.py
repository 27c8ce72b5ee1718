"""fa1's backward under Nsight Compute at points that test the L2 model's prefetch eviction
(iosim.model.memory.refetched): DRAM reads beyond the Plan's two-level reads as the bytes the
resident CTAs move between a prefetch and its load grow past the L2's share, one CTA a head
(split_cols = N, no atomics). The points' resident CTAs x bytes a trip span 11-29 MB.

On the GPU machine (after `. experiments/gpu_env.sh ncu_mechanism`):
    python3 experiments/ncu_mechanism/prefetch14.py OUTDIR
writes OUTDIR/ncu_prefetch14.csv (sass13.py's format) and each point's raw ncu output;
`python tools/fa1_sass.py --dram OUTDIR/ncu_prefetch14.csv` sets them beside the model.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from sass13 import known, profile  # noqa: E402

# (batch, heads, seqlen, head_dim, causal): d = 256 at 48, 64, 96 heads (one CTA a head, under
# one wave), d = 192 at 128 heads, d = 128 at 256 heads (132 resident)
POINTS = [(12, 8, 1024, 256, False), (6, 8, 1024, 256, False), (8, 8, 1024, 256, False),
          (16, 8, 1024, 192, False), (16, 16, 1024, 128, False)]
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
           "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed"]


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = known(METRICS)
    recs: list[dict] = []
    for pt in POINTS:
        try:
            recs += profile(pt, metrics, out, split_cols=pt[2])
            print("ok", pt, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, str(e)[:300], flush=True)
        with open(out / "ncu_prefetch14.csv", "w", newline="") as f:  # as it goes
            w = csv.DictWriter(f, ["batch", "heads", "seqlen", "head_dim", "causal", "kernel",
                                   "metric", "value"])
            w.writeheader()
            w.writerows(recs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 experiments/ncu_mechanism/prefetch14.py OUTDIR")
    main(sys.argv[1])
