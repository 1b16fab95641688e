"""The moetrain model written again in plain PyTorch, with autograd for the gradients.

Everything here follows the DeepSeek-V3 report and moetrain's docs (docs/model.md), not moetrain's code:
it is the independent side of tests/oracle/check_step.py (in float64) and the PyTorch side of
bench/vs_pytorch.sh (in float32): it computes in the dtype of the weights it is given.
"""
import math

import torch

from gemm_arithmetic import Plain
from qk_clip_reference import head_maxima


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def yarn_m(scaling, x):
    """YaRN's magnitude 0.1 x ln(s) + 1 (DeepSeek-V3's inference code and Hugging Face config)."""
    if scaling is None or scaling["factor"] <= 1:
        return 1.0
    return 0.1 * x * math.log(scaling["factor"]) + 1.0


def yarn(m):
    """The model's rope_scaling when it is YaRN, else None."""
    s = m.get("rope_scaling", {})
    return s if s.get("kind") == "yarn" else None


def rope(x, offset, rot, seq, theta, scaling=None):
    """Rotates interleaved pairs of features [offset, offset+rot) of x [rows, heads, width]; with
    YaRN (Peng et al. 2023, as DeepSeek-V3 applies it) the frequencies are blended between kept and
    divided by the factor along a ramp of pair indices, and cos and sin scaled."""
    rows = x.shape[0]
    pos = (torch.arange(rows, dtype=x.dtype) % seq)[:, None]
    freq = theta ** (-2.0 * torch.arange(rot // 2, dtype=torch.float64) / rot)
    magnitude = 1.0
    if scaling is not None and scaling["factor"] > 1:
        def dim_for(turns):  # the pair index whose wavelength fits `turns` times in the original context
            return rot * math.log(scaling["original_seq_len"] / (turns * 2 * math.pi)) / (2 * math.log(theta))
        low = max(math.floor(dim_for(scaling["beta_fast"])), 0)
        high = min(math.ceil(dim_for(scaling["beta_slow"])), rot - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(rot // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        freq = freq * (1 - ramp) + freq / scaling["factor"] * ramp
        magnitude = yarn_m(scaling, scaling["mscale"]) / yarn_m(scaling, scaling["mscale_all_dim"])
    ang = (pos * freq.to(x.dtype)[None, :])[:, None, :]
    part = x[..., offset:offset + rot]
    x0, x1 = part[..., 0::2], part[..., 1::2]
    cos, sin = magnitude * ang.cos(), magnitude * ang.sin()
    rotated = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
    return torch.cat([x[..., :offset], rotated, x[..., offset + rot:]], dim=-1)


def swiglu(lin, x, w_gate, w_up, w_down, rows=None, stored=None, stored_grad=None):
    """lin(x, w, layer, rows): the model's linear map (Arithmetic.linear); stored(y): the gate and up
    outputs as SwiGLU reads them (Arithmetic.stored_output);
    stored_grad(h): h whose gradient is stored as SwiGLU's backward reads it (Arithmetic.stored_gradient)."""
    stored, grad = stored or (lambda y: y), stored_grad or (lambda h: h)
    gate, up = stored(lin(x, w_gate, "", rows)), stored(lin(x, w_up, "", rows))
    return lin(grad(torch.nn.functional.silu(gate) * up), w_down, "", rows)


class Reference:
    def __init__(self, cfg, params, buffers, arithmetic=None):
        """cfg: the resolved experiment (dict from TOML); params, buffers: name -> tensor; arithmetic:
        how GEMMs round their inputs (gemm_arithmetic.Arithmetic; default the dtype's plain products)."""
        self.cfg, self.p, self.buf = cfg, params, buffers
        self.ar = arithmetic or Plain()
        self.m = cfg["model"]
        self.loads = {}  # MoE layer prefix -> tokens routed to each expert
        self.maxima = {}  # attention prefix -> each head's largest logit (QK-Clip's S_h)

    def attention(self, pre, x, batch):
        m, p, ar = self.m, self.p, self.ar
        lin = ar.linear
        a, rows, heads, seq, theta = m["attention"], x.shape[0], m["n_heads"], m["seq_len"], m["rope_theta"]
        ys = yarn(m)
        # YaRN sharpens attention by m(mscale_all_dim)^2.
        sharpen = yarn_m(ys, ys["mscale_all_dim"]) ** 2 if ys else 1.0
        if a["kind"] == "mha":
            hd = m["head_dim"]
            kv_heads = a["n_kv_heads"] or heads
            q = rope(ar.stored_output(lin(x, p[pre + ".wq"])).view(rows, heads, hd), 0, hd, seq, theta, ys)
            k = rope(ar.stored_output(lin(x, p[pre + ".wk"])).view(rows, kv_heads, hd), 0, hd, seq, theta, ys)
            v = lin(x, p[pre + ".wv"]).view(rows, kv_heads, hd)
            k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
            self.maxima[pre] = head_maxima(q, k, batch, seq, sharpen / math.sqrt(hd))
            return ar.stored_output(lin(ar.attention(q, k, v, batch, seq, sharpen / math.sqrt(hd)), p[pre + ".wo"]))
        nope, rp, vd, kvl = a["qk_nope_head_dim"], a["qk_rope_head_dim"], a["v_head_dim"], a["kv_lora_rank"]
        if a["q_lora_rank"] > 0:
            cq = rmsnorm(lin(x, p[pre + ".wq_a"]), p[pre + ".q_norm"], m["norm_eps"])
            q = lin(cq, p[pre + ".wq_b"])
        else:
            q = lin(x, p[pre + ".wq"])
        q = rope(ar.stored_output(q).view(rows, heads, nope + rp), nope, rp, seq, theta, ys)
        ckv = lin(x, p[pre + ".wkv_a"])
        latent, k_rope = ckv[:, :kvl], rope(ckv[:, None, kvl:], 0, rp, seq, theta, ys)
        kv = lin(rmsnorm(latent, p[pre + ".kv_norm"], m["norm_eps"]), p[pre + ".wkv_b"]).view(rows, heads, nope + vd)
        k = torch.cat([kv[..., :nope], k_rope.expand(rows, heads, rp)], dim=-1)
        v = kv[..., nope:]
        self.maxima[pre] = head_maxima(q, k, batch, seq, sharpen / math.sqrt(nope + rp))
        return ar.stored_output(lin(ar.attention(q, k, v, batch, seq, sharpen / math.sqrt(nope + rp)), p[pre + ".wo"]))

    def moe(self, pre, x, balance):
        e, p = self.m["moe"], self.p
        rows, E, K = x.shape[0], e["n_routed_experts"], e["top_k"]
        scores = torch.sigmoid(self.ar.linear(x, p[pre + ".router"], "router"))
        biased = scores.detach() + self.buf[pre + ".router_bias"]
        groups = e["n_groups"]
        if groups > 1:  # keep the topk_groups groups with the best sum of their two best biased scores
            per = E // groups
            score = biased.view(rows, groups, per).topk(min(2, per), dim=-1).values.sum(-1)
            keep = torch.zeros(rows, groups, dtype=torch.bool)
            keep.scatter_(1, score.topk(e["topk_groups"], dim=-1).indices, True)
            biased = biased.masked_fill(~keep.repeat_interleave(per, dim=1), float("-inf"))
        chosen = biased.topk(K, dim=-1).indices
        selected = scores.gather(1, chosen)
        gates = e["route_scale"] * selected / selected.sum(-1, keepdim=True)
        y = torch.zeros_like(x)
        if e["n_shared_experts"] > 0:
            y = y + swiglu(self.ar.linear, x, p[pre + ".shared.w_gate"], p[pre + ".shared.w_up"],
                           p[pre + ".shared.w_down"], stored=self.ar.stored_output,
                           stored_grad=self.ar.stored_gradient)
        for i in range(E):
            token, slot = (chosen == i).nonzero(as_tuple=True)
            if len(token):
                out = swiglu(self.ar.linear, x[token], p[pre + ".experts.w_gate"][i], p[pre + ".experts.w_up"][i],
                             p[pre + ".experts.w_down"][i], token, stored=self.ar.stored_output,
                             stored_grad=self.ar.stored_gradient)
                # under bf16 autocast `out` is bf16 while y keeps x's dtype; index_add needs one dtype
                y = y.index_add(0, token, (gates[token, slot, None] * out).to(y.dtype))
        routed = torch.zeros(rows, E, dtype=x.dtype).scatter_(1, chosen, 1.0)
        self.loads[pre] = routed.sum(0)
        aux = torch.zeros((), dtype=x.dtype)
        size, weight = balance
        if size:
            share = scores / scores.sum(-1, keepdim=True)
            for g in range(rows // size):
                f = routed[g * size:(g + 1) * size].sum(0) * E / (K * size)
                aux = aux + weight * e["aux_alpha"] * (f * share[g * size:(g + 1) * size].mean(0)).sum()
        return y, aux

    def block(self, pre, moe, x, batch, balance):
        m, p = self.m, self.p
        h = x + self.attention(pre + ".attn", rmsnorm(x, p[pre + ".attn_norm"], m["norm_eps"]), batch)
        n = rmsnorm(h, p[pre + ".ffn_norm"], m["norm_eps"])
        if moe:
            f, aux = self.moe(pre + ".moe", n, balance)
        else:
            f, aux = self.ar.stored_output(swiglu(self.ar.linear, n, p[pre + ".ffn.w_gate"], p[pre + ".ffn.w_up"],
                                                  p[pre + ".ffn.w_down"], stored=self.ar.stored_output,
                                                  stored_grad=self.ar.stored_gradient)), 0.0
        return h + f, aux

    def balance_groups(self, batch):
        """(tokens per balance group, weight of each group's loss in the objective)."""
        kind, seq, micro = self.m["moe"]["aux_loss"], self.m["seq_len"], self.cfg["training"]["micro_batch"]
        return {"none": (0, 0.0), "sequence": (seq, 1.0 / batch), "micro_batch": (seq * micro, micro / batch),
                "global_batch": (seq * batch, 1.0)}[kind]

    def loss(self, inputs, targets):
        """inputs, targets [batch, seq] -> (objective, mean cross-entropy, aux, mtp, logits)."""
        m, p = self.m, self.p
        batch, seq = inputs.shape
        tokens, tgt = inputs.reshape(-1), targets.reshape(-1)
        balance = self.balance_groups(batch)
        x = p["embedding"][tokens]
        aux = 0.0
        for layer in range(m["n_layers"]):
            x, a = self.block(f"blocks.{layer}", layer >= m["n_dense_layers"], x, batch, balance)
            aux = aux + a
        logits = self.ar.linear(rmsnorm(x, p["final_norm"], m["norm_eps"]), p["head"], "head")
        ce = torch.nn.functional.cross_entropy(logits, tgt)
        depth, mtp = m["mtp"]["depth"], 0.0
        pos = torch.arange(batch * seq) % seq
        h = x
        for k in range(1, depth + 1):  # report eqs. 21-25
            pre = f"mtp.{k - 1}"
            inside = pos + k < seq
            shifted = torch.where(inside, torch.roll(tokens, -k), 0)
            shifted_tgt = torch.where(inside, torch.roll(tgt, -k), -100)
            joined = torch.cat([rmsnorm(h, p[pre + ".hidden_norm"], m["norm_eps"]),
                                rmsnorm(p["embedding"][shifted], p[pre + ".embed_norm"], m["norm_eps"])], dim=-1)
            h, a = self.block(pre + ".block", m["n_layers"] > m["n_dense_layers"],
                              self.ar.linear(joined, p[pre + ".proj"]), batch, balance)
            aux = aux + a
            k_logits = self.ar.linear(rmsnorm(h, p[pre + ".out_norm"], m["norm_eps"]), p["head"], "head")
            mtp = mtp + torch.nn.functional.cross_entropy(k_logits, shifted_tgt, ignore_index=-100) / depth
        return ce + aux + m["mtp"]["weight"] * mtp, ce, aux, mtp, logits


def learning_rate(cfg, step):
    peak, s = cfg["optimizer"]["lr"], cfg["lr_schedule"]
    if step < s["warmup_steps"]:
        return peak * (step + 1) / s["warmup_steps"]
    if s["kind"] == "constant":
        return peak
    decay = cfg["training"]["steps"] - s["warmup_steps"]
    if decay <= 1:
        return peak
    progress = (step - s["warmup_steps"]) / (decay - 1)
    low = peak * s["min_lr_ratio"]
    return low + 0.5 * (peak - low) * (1 + math.cos(math.pi * progress))
