"""PyTorch's causal scaled_dot_product_attention on the GPU, bf16, on bench/attention_bench.cpp's
cases, printing lines in attention_bench's form so the two compare line by line:

    python3 bench/attention_sdpa.py

FLOPs as attention_bench counts them (forward 2 * batch * heads * seq^2 / 2 * (qk + v), backward
2.5 times that). Each case runs on PyTorch's own choice (pytorch-sdpa) and on its FlashAttention
(pytorch-flash) and cuDNN (pytorch-cudnn) backends; a backend that does not take a shape prints a
line saying so. Without a GPU it prints a skip line.
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [("pytorch-sdpa", None), ("pytorch-flash", SDPBackend.FLASH_ATTENTION),
            ("pytorch-cudnn", SDPBackend.CUDNN_ATTENTION)]

CASES = [("gpt2", 8, 12, 1024, 64, 64), ("d128 seq4096", 2, 16, 4096, 128, 128), ("mla seq4096", 1, 16, 4096, 192, 128)]


def ms_per_call(fn, reps=10):
    fn()
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / reps


def main():
    if not torch.cuda.is_available():
        print("attention_sdpa: skipped: no GPU")
        return
    for name, batch, heads, seq, qk, v in CASES:
        gen = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(batch, heads, seq, qk, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
        k = torch.randn(batch, heads, seq, qk, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
        w = torch.randn(batch, heads, seq, v, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
        dout = torch.randn(batch, heads, seq, v, device="cuda", dtype=torch.bfloat16, generator=gen)
        for label, backend in BACKENDS:
            try:
                fwd, bwd = measure(q, k, w, dout, backend)
            except RuntimeError as e:
                print(f"attention {label} bf16 {name}: not run ({str(e).splitlines()[0][:100]})")
                continue
            flops = 2.0 * batch * heads * seq * seq / 2 * (qk + v)
            print(f"attention {label} bf16 {name} batch={batch} heads={heads} seq={seq} qk={qk} v={v}: "
                  f"fwd+bwd {3.5 * flops / ((fwd + bwd) * 1e-3) / 1e12:.1f} TFLOP/s (fwd {fwd:.3f} ms "
                  f"{flops / (fwd * 1e-3) / 1e12:.1f} TFLOP/s, bwd {bwd:.3f} ms "
                  f"{2.5 * flops / (bwd * 1e-3) / 1e12:.1f} TFLOP/s)")


def measure(q, k, w, dout, backend):
    """Milliseconds of forward and of backward on `backend` (None: PyTorch's choice)."""
    def sdpa():
        if backend is None:
            return F.scaled_dot_product_attention(q, k, w, is_causal=True)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, w, is_causal=True)
    out = sdpa()
    fwd = ms_per_call(sdpa)
    bwd = ms_per_call(lambda: torch.autograd.grad(out, (q, k, w), dout, retain_graph=True))
    return fwd, bwd


if __name__ == "__main__":
    main()
