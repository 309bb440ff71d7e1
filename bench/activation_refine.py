"""Refine the activation model for the decision it makes (used by fit_activation.py; tune data only).

The logistic model is fitted row by row (is this skill expected for this request?), but the product decides per
request: a request no skill serves is quiet only if its MOST likely skill stays below the threshold, and a request
that needs skills is served only if each one is above it and among the first 3. Starting from the logistic
solution, this maximizes a smoothed version of exactly those counts (the threshold's logit at 0, i.e. the
intercept absorbs it):

    quiet(request)  = sigmoid(-softmax_tau(logits))
    hit(request)    = prod over expected groups g of
                      sigmoid(z_g) * sigmoid((3 - groups + 0.5 - sum over other skills of sigmoid(z_j - z_g)) / 0.3)
    objective       = mean hit + quiet_weight * mean quiet, for MetaTool awareness and for the dev set (each
                      benchmark's means, added), minus l2 * ||standardized w - standardized w_logistic||^2

with Adam (torch, CPU, float64; deterministic). The weights of evidence that can only speak for a skill stay >= 0.
"""

from __future__ import annotations

import numpy as np

NEG = -1e4  # logit of a padding row


def _tensors(samples) -> dict:
    """Pad every message request's candidate rows into (requests, rows, features) tensors, plus the expected
    groups as masks."""
    import torch

    S = [s for s in samples if s.case.source != "dev-file"]
    R, F = max(len(s.rows) for s in S), S[0].X.shape[1]
    X, M, gold = np.zeros((len(S), R, F)), np.zeros((len(S), R), bool), np.zeros((len(S), R), bool)
    group_mask, group_of, group_n = [], [], []
    for b, s in enumerate(S):
        X[b, :len(s.rows)], M[b, :len(s.rows)] = s.X[s.rows], True
        at = {int(i): j for j, i in enumerate(s.rows)}
        for g in s.case.groups:
            m = np.zeros(R, bool)
            for i in g:
                if i in at:
                    m[at[i]] = gold[b, at[i]] = True
            group_mask.append(m)
            group_of.append(b)
            group_n.append(len(s.case.groups))
    src = np.asarray([0 if s.case.source == "metatool" else 1 for s in S])
    pos = np.asarray([bool(s.case.groups) for s in S])
    t = torch.tensor
    return {"X": t(X), "M": t(M), "gold": t(gold), "gm": t(np.asarray(group_mask)), "gs": t(group_of),
            "gn": t(group_n, dtype=torch.float64), "src": t(src), "pos": t(pos), "n": len(S)}


def smoothed(T: dict, w, b, tau: float = 1.0) -> dict:
    """The smoothed hit and quiet rates per benchmark for weights ``w`` and intercept ``b`` (torch tensors)."""
    import torch

    z = torch.where(T["M"], T["X"] @ w + b, torch.full(T["M"].shape, NEG, dtype=torch.float64))
    quiet = torch.sigmoid(-torch.logsumexp(z / tau, 1))
    zs = z[T["gs"]]
    zg = tau * torch.logsumexp(torch.where(T["gm"], zs, torch.full_like(zs, NEG)) / tau, 1)
    others = T["M"][T["gs"]] & ~T["gold"][T["gs"]]
    above = (torch.sigmoid((zs - zg[:, None]) / tau) * others).sum(1)
    per_group = torch.sigmoid(zg / tau) * torch.sigmoid((3 - T["gn"] + 0.5 - above) / 0.3)
    hit = torch.ones(T["n"], dtype=torch.float64).index_reduce(0, T["gs"], per_group, "prod")
    out = {}
    for code, name in ((0, "metatool"), (1, "dev")):
        sel = T["src"] == code
        out[name + "_hit"] = hit[sel & T["pos"]].mean()
        out[name + "_quiet"] = quiet[sel & ~T["pos"]].mean()
    return out


def refine_decision(samples, w0: np.ndarray, b0: float, nonneg: np.ndarray, quiet_weight: float, l2: float,
                    steps: int = 200, lr: float = 0.05) -> tuple[np.ndarray, float]:
    """(weights, intercept) maximizing the smoothed decision objective from the logistic (w0, b0)."""
    import warnings

    import torch

    torch.set_num_threads(1)
    sd = np.vstack([s.X[s.rows] for s in samples]).std(0)
    sd[sd < 1e-9] = 1.0
    T, sdt = _tensors(samples), torch.tensor(sd)
    v0 = torch.tensor(w0 * sd)  # standardized weights
    v = v0.clone().requires_grad_(True)
    b = torch.tensor(float(b0), dtype=torch.float64, requires_grad=True)
    keep = torch.tensor(nonneg)
    opt = torch.optim.Adam([v, b], lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce is "beta" in torch
        for _ in range(steps):
            opt.zero_grad()
            m = smoothed(T, v / sdt, b)
            gain = sum(m[f"{src}_hit"] + quiet_weight * m[f"{src}_quiet"] for src in ("metatool", "dev"))
            loss = -gain + l2 * ((v - v0) ** 2).sum()
            loss.backward()
            opt.step()
            with torch.no_grad():
                v[keep] = v[keep].clamp(min=0.0)
    return (v / sdt).detach().numpy(), float(b.detach())
