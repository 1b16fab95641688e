"""QK-Clip as the Kimi K2 report (arXiv 2507.20534, section 2.1) states it, for check_step.py.

After the optimizer's step, each head h whose largest pre-softmax logit of the step S_h (after the softmax
scale, causal mask applied) exceeds tau is rescaled with gamma = tau / S_h so that its logits shrink by gamma:
plain multi-head attention scales the head's query and key projections by sqrt(gamma) each; MLA scales the
head's non-rotary query and key parts (q_C, k_C) by sqrt(gamma) and its rotary query part (q_R) by gamma, and
leaves the rotary key shared by all heads (k_R) alone. With grouped key heads the key head is shared like
k_R: left alone, the query head scaled by gamma.
"""
import torch


def head_maxima(q, k, batch, seq, scale):
    """q, k [batch*seq, heads, dim] (k repeated per query head) -> [heads] the largest scale * q_t . k_s, s <= t."""
    heads = q.shape[1]
    qs = q.detach().reshape(batch, seq, heads, -1).transpose(1, 2)
    ks = k.detach().reshape(batch, seq, heads, -1).transpose(1, 2)
    scores = scale * qs @ ks.transpose(-1, -2)
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    return scores.masked_fill(~causal, float("-inf")).amax(dim=(0, 2, 3))


def gamma(maxima, tau):
    """Per head: tau / S_h where S_h > tau, else 1."""
    return torch.where(maxima > tau, tau / maxima, torch.ones_like(maxima))


def scale_rows(w, heads, per_head, begin, end, factor):
    """Rows [begin, end) of each head's `per_head` rows of w [heads * per_head, cols] times factor[head]."""
    view = w.view(heads, per_head, -1)
    view[:, begin:end] *= factor[:, None, None]


def qk_clip(params, cfg, maxima):
    """params: name -> tensor, after the optimizer's step (changed in place); maxima: attention prefix
    ("blocks.0.attn") -> [heads] S_h of the step."""
    m, tau = cfg["model"], cfg["optimizer"]["qk_clip"]["tau"]
    a, heads = m["attention"], m["n_heads"]
    with torch.no_grad():
        for pre, s in maxima.items():
            g = gamma(s, tau)
            if a["kind"] == "mha":
                hd = m["head_dim"]
                if (a["n_kv_heads"] or heads) < heads:
                    scale_rows(params[pre + ".wq"], heads, hd, 0, hd, g)
                else:
                    scale_rows(params[pre + ".wq"], heads, hd, 0, hd, g.sqrt())
                    scale_rows(params[pre + ".wk"], heads, hd, 0, hd, g.sqrt())
                continue
            nope, qk = a["qk_nope_head_dim"], a["qk_nope_head_dim"] + a["qk_rope_head_dim"]
            wq = params[pre + (".wq_b" if a["q_lora_rank"] > 0 else ".wq")]
            scale_rows(wq, heads, qk, 0, nope, g.sqrt())  # q_C
            scale_rows(wq, heads, qk, nope, qk, g)  # q_R
            scale_rows(params[pre + ".wkv_b"], heads, nope + a["v_head_dim"], 0, nope, g.sqrt())  # k_C
