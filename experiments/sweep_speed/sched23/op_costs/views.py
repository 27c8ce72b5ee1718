"""Instructions per call of small numpy operations (views); run by run.sh under callgrind."""
import ctypes
import mmap

import numpy as np
from numpy._core.multiarray import count_nonzero as cnz

code = bytes.fromhex("534889f831d248c1c70348c1c70d48c1c73d48c1c73348" "87db4889d05bc3")
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
req = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
BASE = (ord("C") << 24) | (ord("T") << 16)
dump = (ctypes.c_ulong * 6)(BASE, 0, 0, 0, 0, 0)
tog = (ctypes.c_ulong * 6)(BASE + 2, 0, 0, 0, 0, 0)
m = 144
T = np.zeros((m, 57))
TT = np.zeros((13, 2, 144))

a = np.zeros(m)
tests = {
 "cnz contiguous 144": lambda: np.count_nonzero(a),
 "cnz col strided": lambda: np.count_nonzero(T[:, 7]),
 "cnz 2 cols strided": lambda: np.count_nonzero(T[:, 7:11:3]),
 "cnz (3,1,10) view": lambda: np.count_nonzero(TT[9:12, :1, 0:10]),
 "raw cnz contiguous": lambda: cnz(a),
 "a.any()": lambda: a.any(),
 "zeros((3,m)); [0]=a": lambda: np.zeros((3, m)).__setitem__(0, a),
 "np.array([a,z,z])": lambda: np.array([a, a, a]),
 "Trip(TT) init": lambda: __import__("iosim.model.timing", fromlist=["x"]).Trip(TT),
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
