"""Muon's step for the oracle, with PyTorch's own torch.optim.Muon (momentum, Nesterov, the update
scale, decoupled weight decay). torch.optim.Muon runs its Newton-Schulz iteration in bfloat16; the
oracle swaps in the same iteration kept in float64 (the reference's precision), line for line from
torch/optim/_muon.py. Which parameters Muon takes is moetrain's rule (src/train/muon.hpp): every 2-D
weight but the embedding and the head, the router's gate unless optimizer.muon.router = "adamw", and
the routed experts' [experts, rows, cols] weights one matrix per expert."""
import torch
import torch.optim._muon as torch_muon


def zeropower_float64(grad, ns_coefficients, ns_steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz without its cast to bfloat16."""
    a, b, c = ns_coefficients
    ortho = grad.clone()
    if grad.size(0) > grad.size(1):
        ortho = ortho.T
    ortho.div_(ortho.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = ortho @ ortho.T
        gram_update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        ortho = torch.addmm(ortho, gram_update, ortho, beta=a)
    if grad.size(0) > grad.size(1):
        ortho = ortho.T
    return ortho


def is_muon(name, tensor, cfg):
    opt = cfg["optimizer"]
    if opt["kind"] != "muon" or name in ("embedding", "head") or tensor.dim() not in (2, 3):
        return False
    return not (name.endswith(".router") and opt["muon"]["router"] == "adamw")


def muon_step(params, cfg, lr, buffers_before=None):
    """One Muon step on the parameters is_muon picks (their .grad set); returns each one's momentum
    buffer (expert weights stacked back). lr: the step's AdamW learning rate, which Muon's follows;
    buffers_before: the momentum buffers the step starts from by name (else zero)."""
    opt, mu = cfg["optimizer"], cfg["optimizer"]["muon"]
    matrices, owners, starts = [], [], []
    for name, t in params.items():
        if not is_muon(name, t, cfg):
            continue
        start = buffers_before[name] if buffers_before else torch.zeros_like(t)
        per_expert = (t, t.grad, start) if t.dim() == 3 else ([t], [t.grad], [start])
        for i, (value, grad, buf) in enumerate(zip(*per_expert)):
            m = value.detach().clone().requires_grad_(True)
            m.grad = grad.clone()
            matrices.append(m)
            owners.append((name, i if t.dim() == 3 else None))
            starts.append(buf.clone())
    if not matrices:
        return {}
    saved = torch_muon._zeropower_via_newtonschulz
    torch_muon._zeropower_via_newtonschulz = zeropower_float64
    try:
        muon = torch.optim.Muon(matrices, lr=mu["lr"] * lr / opt["lr"], weight_decay=mu["weight_decay"],
                                momentum=mu["momentum"], nesterov=mu["nesterov"],
                                ns_coefficients=tuple(mu["ns_coefficients"]), eps=mu["eps"],
                                ns_steps=mu["ns_steps"], adjust_lr_fn=mu["scale"])
        for m, buf in zip(matrices, starts):
            muon.state[m] = {"momentum_buffer": buf}
        muon.step()
    finally:
        torch_muon._zeropower_via_newtonschulz = saved
    buffers = {}
    with torch.no_grad():
        for m, (name, i) in zip(matrices, owners):
            buf = muon.state[m]["momentum_buffer"]
            if i is None:
                params[name].copy_(m)
                buffers[name] = buf
            else:
                params[name][i].copy_(m)
                buffers.setdefault(name, torch.zeros_like(params[name]))[i] = buf
    return buffers
