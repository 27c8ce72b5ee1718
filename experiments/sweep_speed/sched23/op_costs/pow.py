"""Instructions per call of small numpy operations (pow); run by run.sh under callgrind."""
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
x = np.random.rand(5, 256)
pi = np.full(5, 132, np.int64)
pf = pi.astype(np.float64)
A = np.random.rand(3, 2, 144)
lv = A[:, :1, 134:144]
tests = {
 "pow int exp": lambda: x ** pi[:, None],
 "pow float exp": lambda: x ** pf[:, None],
 "astype": lambda: pi.astype(np.float64),
 "copy strided": lambda: lv.copy(),
 "lambda": lambda: None,
}
for k, f in tests.items():
    f()
    req(ctypes.addressof(dump))
    req(ctypes.addressof(tog))
    for _ in range(100):
        f()
    req(ctypes.addressof(tog))
    req(ctypes.addressof(dump))
    print(k)
