"""The backward grid of reports/data/<gpu>/measured_bwd.csv: bf16, N = 512..16384 (doubling),
d = 64, 128, 256, causal and not, batch = 16384/N, heads = 2048/d, naive, fa1 and fa2 beside
torch's SDPA backward, rows appended to OUT (resumed if it exists). The same rows as
`iosim bench --direction bwd --schedule naive,fa1,fa2 --seqlen 512..16384 --head-dim 64,128,256
--causal both --dtype bf16 --peers torch -o OUT --resume`, called below the CLI layer (the GPU
machine's typer lacks what iosim.cli's help formatting uses).
Usage: python3 benchmarks/bwd_bench.py OUT.csv"""

import sys
from pathlib import Path

from iosim.analysis import bench
from iosim.core.problem import Problem

problems = [Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="bf16",
                    causal=c, direction="bwd")
            for n in (512, 1024, 2048, 4096, 8192, 16384) for d in (64, 128, 256)
            for c in (False, True)]
df = bench.run(problems, ["naive", "fa1", "fa2"], True, Path(sys.argv[1]), None, True, False)
ok = df[df.status == "ok"]
print(f"{len(df)} rows in {sys.argv[1]}; {len(ok)} ok, {len(df) - len(ok)} not ok")
