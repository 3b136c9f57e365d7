"""The judge's small trained networks run in numpy: linear layers, GELU, softmax, attention pooling.

The heads (the fast CRM's towers, the criteria readers) are trained with torch (``fast/train.py``,
``fit_reader``, ``criteria_reading.fit``) and saved as safetensors; judging reads those same tensors as
arrays, so ranking a board imports neither torch nor transformers (issue 47: most of a `usl rank
--no-server` was loading them). Each forward here is the torch module's, layer for layer; the readers'
and the fast CRM's tests compare the two.

A state is ``{name: float32 array}`` as ``module.state_dict()`` names it; ``mlp(x, state, "crit_sem")``
runs the linear layers under that prefix in index order with a GELU between each two (dropout is
the identity at inference): ``nn.Sequential(nn.Linear, nn.GELU, nn.Linear)`` and
``nn.Sequential(nn.Dropout, nn.Linear, nn.GELU, nn.Linear)`` alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import erf

State = dict[str, np.ndarray]


def load_state(path: str | Path) -> State:
    """A safetensors file's tensors as float32 arrays (fp16 files included)."""
    from safetensors.numpy import load_file

    return {k: np.asarray(v, dtype=np.float32) for k, v in load_file(str(path)).items()}


def state_of(module) -> State:
    """A torch module's parameters and buffers as float32 arrays (after training it)."""
    return {k: v.detach().float().cpu().numpy() for k, v in module.state_dict().items()}


def linear(x: np.ndarray, state: State, name: str) -> np.ndarray:
    """``nn.Linear`` over the last axis. Token states (n, t, d) are multiplied as one (n * t, d) matrix:
    numpy's stacked matmul against a transposed weight skips BLAS and ran 4x slower."""
    w = state[f"{name}.weight"]
    return (x.reshape(-1, x.shape[-1]) @ w.T + state[f"{name}.bias"]).reshape(*x.shape[:-1], w.shape[0])


def gelu(x: np.ndarray) -> np.ndarray:
    """torch's default (exact) GELU: x * Phi(x)."""
    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(x.dtype, copy=False)


def conv1d_same(x: np.ndarray, state: State, name: str) -> np.ndarray:
    """``nn.Conv1d(d, d, k, padding=k // 2)`` over the token axis of (n, t, d) states (odd ``k``)."""
    w, b = state[f"{name}.weight"], state[f"{name}.bias"]  # (out, in, k)
    k = w.shape[-1]
    pad = np.pad(x, ((0, 0), (k // 2, k // 2), (0, 0)))
    return (sum(pad[:, j:j + x.shape[1]] @ w[:, :, j].T for j in range(k)) + b).astype(np.float32)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softplus(x: float | np.ndarray) -> float | np.ndarray:
    return np.logaddexp(0.0, x)


def mlp(x: np.ndarray, state: State, prefix: str) -> np.ndarray:
    """The linear layers ``prefix.<i>`` in order of ``i``, a GELU between each two."""
    idx = sorted({int(k.split(".")[1]) for k in state if k.startswith(prefix + ".") and k.endswith(".weight")})
    if not idx:
        raise KeyError(f"no linear layers under {prefix!r}")
    for n, i in enumerate(idx):
        x = linear(x, state, f"{prefix}.{i}")
        if n < len(idx) - 1:
            x = gelu(x)
    return x


def attention_pool(h: np.ndarray, mask: np.ndarray, state: State) -> np.ndarray:
    """(n, t, d) token states, (n, t) mask -> (n, hidden): ``proj`` each token, weigh the tokens by the
    softmax of ``att`` over the unmasked ones, sum."""
    x = linear(h, state, "proj")
    a = softmax(np.where(mask == 0, -1e9, linear(x, state, "att")[..., 0]), -1)
    return (a[..., None] * x).sum(1)
