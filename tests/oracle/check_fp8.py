"""moetrain's FP8 conversion against PyTorch's, bit for bit.

    python tests/oracle/check_fp8.py build/tests/fp8_codes

Every bfloat16 value and a million random float32 values (every exponent from subnormal to far
beyond the formats' range) go through moetrain's E4M3 and E5M2 conversion and through
`torch.clamp(x, -max, max).to(torch.float8_e4m3fn / float8_e5m2)`: moetrain saturates out-of-range
values (CUDA's satfinite), PyTorch does not, so PyTorch sees the clamped value. NaN inputs must give
NaN codes. Prints the counts and exits non-zero on any difference.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch


def inputs():
    bf16 = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    exponent = (rng.integers(97, 160, size=bits.size).astype(np.uint32)) << 23  # 2^-30 .. 2^32
    sample = ((bits & np.uint32(0x807FFFFF)) | exponent).view(np.float32)
    return np.concatenate([bf16, sample])


def main():
    binary = sys.argv[1]
    x = inputs()
    with tempfile.TemporaryDirectory() as tmp:
        src, e4, e5 = (Path(tmp) / n for n in ("x.f32", "e4m3.u8", "e5m2.u8"))
        x.tofile(src)
        subprocess.run([binary, str(src), str(e4), str(e5)], check=True)
        ours = {"e4m3": np.fromfile(e4, dtype=np.uint8), "e5m2": np.fromfile(e5, dtype=np.uint8)}
    nan = np.isnan(x)
    failed = False
    for name, dtype, limit, nan_code in (("e4m3", torch.float8_e4m3fn, 448.0, 0x7F),
                                         ("e5m2", torch.float8_e5m2, 57344.0, None)):
        clamped = torch.from_numpy(np.where(nan, 0, np.clip(x, -limit, limit)).astype(np.float32))
        theirs = clamped.to(dtype).view(torch.uint8).numpy()
        mine = ours[name]
        differ = int(np.count_nonzero((mine != theirs) & ~nan))
        if nan_code is not None:
            nan_ok = bool(np.all((mine[nan] & 0x7F) == nan_code))
        else:
            nan_ok = bool(np.all(((mine[nan] & 0x7C) == 0x7C) & ((mine[nan] & 0x03) != 0)))
        print(f"{name}: {x.size - int(nan.sum())} values, {differ} differ from PyTorch; "
              f"{int(nan.sum())} NaNs {'stay NaN' if nan_ok else 'LOST'}")
        failed = failed or differ > 0 or not nan_ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
