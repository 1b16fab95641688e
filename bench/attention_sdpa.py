"""PyTorch's causal scaled_dot_product_attention on the GPU, bf16, on bench/attention_bench.cpp's
cases, printing lines in attention_bench's form so the two compare line by line:

    python3 bench/attention_sdpa.py

FLOPs as attention_bench counts them (forward 2 * batch * heads * seq^2 / 2 * (qk + v), backward
2.5 times that). PyTorch picks its own backend (FlashAttention, cuDNN or memory-efficient); the
numbers are whatever it chose. Without a GPU it prints a skip line.
"""
import torch
import torch.nn.functional as F

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
        out = F.scaled_dot_product_attention(q, k, w, is_causal=True)
        fwd = ms_per_call(lambda: F.scaled_dot_product_attention(q, k, w, is_causal=True))
        bwd = ms_per_call(lambda: torch.autograd.grad(out, (q, k, w), dout, retain_graph=True))
        flops = 2.0 * batch * heads * seq * seq / 2 * (qk + v)
        print(f"attention pytorch-sdpa bf16 {name} batch={batch} heads={heads} seq={seq} qk={qk} v={v}: "
              f"fwd+bwd {3.5 * flops / ((fwd + bwd) * 1e-3) / 1e12:.1f} TFLOP/s (fwd {fwd:.3f} ms "
              f"{flops / (fwd * 1e-3) / 1e12:.1f} TFLOP/s, bwd {bwd:.3f} ms {2.5 * flops / (bwd * 1e-3) / 1e12:.1f} TFLOP/s)")


if __name__ == "__main__":
    main()
