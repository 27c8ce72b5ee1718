"""Instructions per call of small numpy operations (calls); run by run.sh under callgrind."""
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
m = 144
a, b = np.random.rand(m), np.random.rand(m)
c = a > 0.5
Z = np.array(0.0)
T = np.random.rand(m, 57)
ca = T[:, 3]
cb = T[:, 9]
out = np.empty(m)
tests = {
 "where(c,a,b)": lambda: np.where(c, a, b),
 "where(c,a,Z0d)": lambda: np.where(c, a, Z),
 "where(c,a,0.0)": lambda: np.where(c, a, 0.0),
 "where strided cols": lambda: np.where(c, ca, cb),
 "copyto where": lambda: np.copyto(out, a, where=c),
 "zeros+copyto": lambda: np.copyto(np.zeros(m), a, where=c),
 "a*c (bool mult)": lambda: a * c,
 "np.multiply(a,b,out)": lambda: np.multiply(a, b, out=out),
 "a*b": lambda: a * b,
 "np.multiply(a,b)": lambda: np.multiply(a, b),
 "np.maximum(a,b)": lambda: np.maximum(a, b),
 "a > Z": lambda: a > Z,
 "a > 0.0": lambda: a > 0.0,
 "zeros(m)": lambda: np.zeros(m),
 "empty(m)": lambda: np.empty(m),
 "np.array([a,b,a])": lambda: np.array([a, b, a]),
 "concat3": lambda: np.concatenate((a, b, a)),
 "a.max()": lambda: a.max(),
 "maximum.reduce 5x144 axis0": lambda: np.maximum.reduce(np.empty((5, m)), axis=0),
 "lambda": lambda: None,
}
for k, f in tests.items():
    f()
    req(ctypes.addressof(dump))
    req(ctypes.addressof(tog))
    for _ in range(200):
        f()
    req(ctypes.addressof(tog))
    req(ctypes.addressof(dump))
    print(k)
