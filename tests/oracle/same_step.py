"""Whether two dump-step files hold the same step, bit for bit: every dataset equal in shape and
bytes (the config text, which names the setting that differs, is not a dataset). Prints what was
compared, or the first dataset that differs, and exits 1 then."""
import sys

import h5py
import numpy as np


def datasets(path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return found


a, b = datasets(sys.argv[1]), datasets(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit(f"different datasets: {sorted(set(a) ^ set(b))}")
for name in sorted(a):
    x, y = np.asarray(a[name]), np.asarray(b[name])
    if x.shape != y.shape or x.tobytes() != y.tobytes():
        sys.exit(f"{name} differs")
print(f"bitwise equal ({len(a)} datasets)")
