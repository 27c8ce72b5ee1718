"""Instructions per call of small numpy operations (shapes); run by run.sh under callgrind."""
import ctypes
import mmap

import numpy as np

code = bytes.fromhex("534889f831d248c1c70348c1c70d48c1c73d48c1c73348" "87db4889d05bc3")
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
req = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
BASE = (ord("C") << 24) | (ord("T") << 16)
dump = (ctypes.c_ulong * 6)(BASE, 0, 0, 0, 0, 0)
tog = (ctypes.c_ulong * 6)(BASE + 2, 0, 0, 0, 0, 0)
A = np.random.rand(3, 2, 144)
B = np.random.rand(3, 2, 144)
P = np.random.rand(2, 144)
c1, c2 = np.random.rand(30), np.random.rand(30)
s1, s2 = A[:, :1, 134:144], B[:, :1, 134:144]
p1 = P[:1, 134:144]
f1, f2 = np.random.rand(3*2*144), np.random.rand(3*2*144)
T = np.random.rand(144, 57)
col = T[:, 5]
col2 = T[:, 7]
cc = col.copy()
cc2 = col2.copy()
z = np.zeros(30)
e = np.array(1.8)
tests = {
 "contig30": lambda: np.maximum(c1, c2),
 "strided(3,1,10)": lambda: np.maximum(s1, s2),
 "bcast (1,10)x(3,1,10)": lambda: np.maximum(p1, s1),
 "full (3,2,144)": lambda: np.maximum(A, B),
 "bcast (2,144)x(3,2,144)": lambda: np.maximum(P, A),
 "flat 864": lambda: np.maximum(f1, f2),
 "col strided 144": lambda: np.maximum(col, col2),
 "col contig 144": lambda: np.maximum(cc, cc2),
 "copy (3,1,10)": lambda: s1.copy(),
 "empty+setitem": lambda: np.empty((3, 1, 10)).__setitem__(Ellipsis, s1),
 "pow30 0d": lambda: np.power(c1, e),
 "pow30 zeros": lambda: np.power(z, e),
 "a+b 30": lambda: c1 + c2,
 "count_nonzero": lambda: np.count_nonzero(c1),
 "where": lambda: np.where(c1 > 0.5, c1, c2),
 "take": lambda: cc.take(np.arange(10)),
}
N = 200
for k, f in tests.items():
    f()
    req(ctypes.addressof(dump))
    req(ctypes.addressof(tog))
    for _ in range(N):
        f()
    req(ctypes.addressof(tog))
    req(ctypes.addressof(dump))
    print(k)
