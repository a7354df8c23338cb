"""GPT-2's causal self-attention in float64 (NumPy), the reference of :mod:`crossfhe.apps.attention`: one layer's
weights drawn as GPT-2 initialises them (:func:`gpt2_weights`), inputs embedded and normalised by ln_1 in the clear
(:func:`gpt2_inputs`), and the attention itself (:func:`attention_float`). Nothing is downloaded: the weights are
seeded NumPy draws, c_attn W [d, 3d] ~ N(0, 0.02^2), c_proj W [d, d] ~ N(0, (0.02 / sqrt(2 n_layer))^2), biases 0,
ln_1 gain 1 and bias 0, wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2)."""

from __future__ import annotations

import numpy as np

LN_EPS = 1e-5
"""GPT-2's LayerNorm epsilon."""


# --------------------------------------------------------------------------------------------------
# The float model
# --------------------------------------------------------------------------------------------------


def gpt2_weights(*, d_model: int = 768, n_layer: int = 12, vocab: int = 50257, n_ctx: int = 1024,
                 seed: int = 0) -> dict:
    """One GPT-2 attention layer's weights and the embeddings, initialised as GPT-2 does (module docstring), from
    ``numpy.random.default_rng(seed)``. Conv1D layout: ``attn_w`` float [d, 3d] (x @ W), ``proj_w`` [d, d]."""
    rng = np.random.default_rng(seed)
    return {
        "wte": rng.normal(0.0, 0.02, (vocab, d_model)), "wpe": rng.normal(0.0, 0.01, (n_ctx, d_model)),
        "ln_g": np.ones(d_model), "ln_b": np.zeros(d_model),
        "attn_w": rng.normal(0.0, 0.02, (d_model, 3 * d_model)), "attn_b": np.zeros(3 * d_model),
        "proj_w": rng.normal(0.0, 0.02 / np.sqrt(2 * n_layer), (d_model, d_model)), "proj_b": np.zeros(d_model),
    }


def gpt2_inputs(weights: dict, n: int, seq_len: int, *, seed: int = 1) -> np.ndarray:
    """``n`` sequences of ``seq_len`` random token ids (seeded), embedded (wte + wpe) and normalised by ln_1 in
    the clear: the attention's input, float [n, seq_len, d]."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, len(weights["wte"]), (n, seq_len))
    h = weights["wte"][tokens] + weights["wpe"][None, :seq_len]
    mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    return (h - mu) / np.sqrt(var + LN_EPS) * weights["ln_g"] + weights["ln_b"]


def attention_float(weights: dict, x, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """GPT-2's causal attention in float64: (the heads' outputs [n, H, s, head_dim], the block's output after
    c_proj [n, s, d]) for inputs ``x`` [n, s, d]."""
    x = np.asarray(x, dtype=np.float64)
    n, s, d = x.shape
    hd = d // n_heads
    qkv = x @ weights["attn_w"] + weights["attn_b"]
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(n, s, n_heads, hd).transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    heads = (p / p.sum(-1, keepdims=True)) @ v
    return heads, heads.transpose(0, 2, 1, 3).reshape(n, s, d) @ weights["proj_w"] + weights["proj_b"]


__all__ = ["LN_EPS", "attention_float", "gpt2_inputs", "gpt2_weights"]
