"""Each dump's name and instructions per call of a callgrind run made with harness.py:
`python report.py CALLGRIND_OUT_FILE CALLS`."""

import glob
import re
import sys

rows = []
for fn in sorted(glob.glob(sys.argv[1] + ".*"), key=lambda s: int(s.rsplit(".", 1)[1]) if s.rsplit(".", 1)[1].isdigit() else 0):
    txt = open(fn).read()
    m = re.search(r"^desc: Trigger: Client Request: (.*)$", txt, re.M)
    t = re.search(r"^summary: (\d+)", txt, re.M) or re.search(r"^totals: (\d+)", txt, re.M)
    if m and t:
        rows.append((m.group(1), int(t.group(1))))
for name, tot in rows:
    print(f"{name:45s} {tot / int(sys.argv[2]):12.0f}")
