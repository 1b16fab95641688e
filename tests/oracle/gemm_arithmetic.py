"""moetrain's GEMM input precisions, written from docs/model.md, docs/fp8.md and DeepSeek-V3's report (3.3).

Reference(arithmetic=Arithmetic(cfg)) computes every linear map and the attention products with the
inputs moetrain gives them, in the reference's own dtype (float64 in the oracle), so the tolerances
stay about those of fp32 instead of the rounding's:
  bf16: each GEMM operand rounded to bfloat16 (round to nearest even from its float32 value), sums
    exact; activations stored in bfloat16 (precision.bf16_activations) are rounded GEMM inputs, so
    storing them so changes no value; with precision.bf16_outputs too, the dense FFN's, the shared
    and the routed experts' gate and up outputs are written by their GEMMs in bfloat16 (rounded once
    from the exact sum) for SwiGLU to read in both passes: stored_output, gradient passed unchanged. So
    are the queries' (MHA's keys' too) projections before RoPE, and the attention output projection's
    and the dense FFN's outputs the residual adds read (one rank: the tensor-parallel partial sums
    stay fp32); in backward, the down projection's input gradient SwiGLU's backward reads (dense FFN,
    shared and routed experts) is rounded once as its Dgrad stores it: stored_gradient.
    Attention rounds queries, keys, values, the probabilities before P V and, in backward, the
    output gradient and the score gradient where they enter products (D = rowsum(dO * O) and dS
    from unrounded values).
  fp8: each operand quantized in scaled pieces along the product's inner dimension K: activations
    and gradients 1 x tile per row in forward and Dgrad, per column and tile rows (tokens, counted
    from the micro-batch's first, or the expert's first of it) in Wgrad; weights in block x block
    squares of the stored matrix, the same squares in both orientations. Scales from each piece's
    largest magnitude (power of two or amax / max), codes through torch.float8_e4m3fn /
    float8_e5m2 of the clamped value (moetrain saturates). The head and the router stay bf16
    unless fp8.head / fp8.router; attention takes the bf16 products.
Plain() is fp32 arithmetic: the plain products of the dtype given, nothing stored rounded.
"""
import torch

BF16, FP8 = "bf16", "fp8"
FORMATS = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}


def to_bf16(x):
    """x's float32 value rounded to bfloat16 (nearest even), back in x's dtype."""
    return x.to(torch.float32).to(torch.bfloat16).to(x.dtype)


def piece_scales(amax, largest, pow2):
    """The scale of each piece: amax / largest, or the smallest power of two s with amax / s <= largest."""
    ratio = amax / largest
    if pow2:
        mantissa, exponent = torch.frexp(ratio)
        ratio = torch.ldexp(torch.ones_like(ratio), torch.where(mantissa == 0.5, exponent - 1, exponent))
    return torch.where(amax > 0, ratio, torch.ones_like(ratio))


def fp8_pieces(x, rows, cols, fmt, pow2):
    """x [R, C] quantized and read back in pieces of rows x cols (edge pieces cut short), in float32."""
    dtype, largest = FORMATS[fmt]
    x32 = x.detach().to(torch.float32)
    R, C = x32.shape
    pr, pc = -(-R // rows), -(-C // cols)
    padded = torch.zeros(pr * rows, pc * cols, dtype=torch.float32)
    padded[:R, :C] = x32
    tiles = padded.view(pr, rows, pc, cols)
    s = piece_scales(tiles.abs().amax(dim=(1, 3), keepdim=True), largest, pow2)
    codes = (tiles / s).clamp(-largest, largest).to(dtype)
    return (codes.to(torch.float32) * s).reshape(pr * rows, pc * cols)[:R, :C].to(x.dtype)


class Arithmetic:
    def __init__(self, cfg, micro_rows):
        """cfg: the resolved experiment; micro_rows: tokens of a micro-batch (Wgrad's pieces start there)."""
        prec, f = cfg["precision"], cfg["fp8"]
        self.matmul, self.micro_rows = prec["matmul"], micro_rows
        self.fmt = {"activation": "e4m3", "weight": "e4m3",
                    "gradient": "e5m2" if f["formats"] == "e4m3_e5m2" else "e4m3"}
        self.tile, self.block = f["tile"], f["block"]
        self.per_tensor, self.pow2 = f["scaling"] == "tensor", f["scale"] == "pow2"
        self.fp8_layers = {"head": f["head"], "router": f["router"]}
        kept = prec.get("bf16_activations", True) and prec.get("bf16_outputs", True)
        self.bf16_outputs = self.matmul == BF16 and kept

    def mode(self, layer):
        """The input precision of `layer`'s GEMMs ('head' and 'router' are kept in bf16 under fp8)."""
        if self.matmul == FP8 and not self.fp8_layers.get(layer, True):
            return BF16
        return self.matmul

    def operand(self, x, mode, kind, k_along_rows):
        """x [R, C] as a GEMM of `mode` reads it; `kind` activation, gradient or weight."""
        if mode == BF16:
            return to_bf16(x)
        if mode != FP8:
            return x
        fmt = self.fmt[kind]
        if self.per_tensor:
            return fp8_pieces(x, max(x.shape[0], 1), max(x.shape[1], 1), fmt, self.pow2)
        if kind == "weight":
            return fp8_pieces(x, self.block, self.block, fmt, self.pow2)
        rows, cols = (self.tile, 1) if k_along_rows else (1, self.tile)
        return fp8_pieces(x, rows, cols, fmt, self.pow2)

    def linear(self, x, w, layer="", rows=None):
        """x [R, in] w^T; rows: each row's token index (an expert's rows), for Wgrad's micro-batches."""
        mode = self.mode(layer)
        if mode not in (BF16, FP8):
            return x @ w.T
        if rows is None:
            rows = torch.arange(x.shape[0])
        return _Linear.apply(x, w, self, mode, torch.div(rows, self.micro_rows, rounding_mode="floor"))

    def stored_output(self, y):
        """A GEMM output SwiGLU reads, as stored: bfloat16 under bf16_activations (a straight-through rounding)."""
        return _Bf16Store.apply(y) if self.bf16_outputs else y

    def stored_gradient(self, x):
        """x unchanged; its gradient as a Dgrad GEMM that writes bfloat16 stores it (under bf16_outputs)."""
        return _Bf16GradStore.apply(x) if self.bf16_outputs else x

    def attention(self, q, k, v, batch, seq, scale):
        if self.matmul not in (BF16, FP8):
            return causal_attention(q, k, v, batch, seq, scale)
        return _Attention.apply(q, k, v, batch, seq, scale)


class Plain:
    """fp32 GEMMs: the plain products."""

    def linear(self, x, w, layer="", rows=None):
        return x @ w.T

    def stored_output(self, y):
        return y

    def stored_gradient(self, x):
        return x

    def attention(self, q, k, v, batch, seq, scale):
        return causal_attention(q, k, v, batch, seq, scale)


class _Bf16Store(torch.autograd.Function):
    """y rounded to bfloat16 as moetrain stores it; the backward reads the rounded values, the gradient passes."""

    @staticmethod
    def forward(ctx, y):
        return to_bf16(y)

    @staticmethod
    def backward(ctx, dy):
        return dy


class _Bf16GradStore(torch.autograd.Function):
    """x unchanged; the gradient that reaches it rounded to bfloat16, as a Dgrad GEMM writing bfloat16 stores it."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, dx):
        return to_bf16(dx)


class _Linear(torch.autograd.Function):
    """y = x w^T with each product's operands as moetrain's Fprop, Dgrad and Wgrad read them."""

    @staticmethod
    def forward(ctx, x, w, arith, mode, micro):
        ctx.save_for_backward(x, w, micro)
        ctx.arith, ctx.mode = arith, mode
        return arith.operand(x, mode, "activation", False) @ arith.operand(w, mode, "weight", False).T

    @staticmethod
    def backward(ctx, dy):
        x, w, micro = ctx.saved_tensors
        a, mode = ctx.arith, ctx.mode
        dx = a.operand(dy, mode, "gradient", False) @ a.operand(w, mode, "weight", True)
        dw = torch.zeros_like(w)
        for m in torch.unique(micro):  # one Wgrad per micro-batch, summed
            at = micro == m
            dw += a.operand(dy[at], mode, "gradient", True).T @ a.operand(x[at], mode, "activation", True)
        return dx, dw, None, None, None


def causal_attention(q, k, v, batch, seq, scale):
    """q, k [rows, H, qk], v [rows, H, vd] -> [rows, H*vd]."""
    heads = q.shape[1]
    q, k, v = (t.reshape(batch, seq, heads, -1).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) * scale
    mask = torch.ones(seq, seq, dtype=torch.bool).tril()
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return (probs @ v).transpose(1, 2).reshape(batch * seq, -1)


class _Attention(torch.autograd.Function):
    """Causal attention with bfloat16 product inputs (docstring above); q, k, v [rows, H, d] -> [rows, H*vd]."""

    @staticmethod
    def forward(ctx, q, k, v, batch, seq, scale):
        heads = q.shape[1]
        qh, kh, vh = (to_bf16(t).reshape(batch, seq, heads, -1).transpose(1, 2) for t in (q, k, v))
        mask = torch.ones(seq, seq, dtype=torch.bool).tril()
        probs = ((qh @ kh.transpose(-1, -2)) * scale).masked_fill(~mask, float("-inf")).softmax(-1)
        out = to_bf16(probs) @ vh
        ctx.save_for_backward(qh, kh, vh, probs, out)
        ctx.shape, ctx.scale = (batch * seq, heads * vh.shape[-1]), scale
        return out.transpose(1, 2).reshape(ctx.shape)

    @staticmethod
    def backward(ctx, dout):
        qh, kh, vh, probs, out = ctx.saved_tensors
        batch, heads, seq, vd = out.shape
        do = dout.reshape(batch, seq, heads, vd).transpose(1, 2)
        do16 = to_bf16(do)
        dv = to_bf16(probs).transpose(-1, -2) @ do16
        d = (do * out).sum(-1, keepdim=True)
        ds = to_bf16(probs * (do16 @ vh.transpose(-1, -2) - d) * ctx.scale)
        dq, dk = ds @ kh, ds.transpose(-1, -2) @ qh
        back = (lambda t: t.transpose(1, 2).reshape(batch * seq, heads, -1))
        return back(dq), back(dk), back(dv), None, None, None
