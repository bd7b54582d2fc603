"""FLOP formulas for the fused and fast-path ops that ``torch.utils.flop_counter`` counts as 0,
and the heavy ops that still have none (the FLOP figure is then partial, and says so).

What users meet without asking for it: a ``TransformerEncoderLayer`` or ``MultiheadAttention``
in ``eval()`` under ``no_grad()`` runs one fused op (``aten::_transformer_encoder_layer_fwd``,
``aten::_native_multi_head_attention``); ``scaled_dot_product_attention`` on CPU runs
``aten::_scaled_dot_product_flash_attention_for_cpu``; an LSTM on CPU runs
``aten::mkldnn_rnn_layer``; int8 code runs ``aten::_int_mm`` or ``quantized::linear_dynamic``.
torch's FlopCounterMode has no formula for any of them, so a transformer's FLOPs read as its
head's alone. The formulas here count what torch's own count for the unfused ops would be: 2 per
multiply-add of every matrix product (projections, attention scores, attention-weighted values,
feed-forward, recurrent gates), nothing for norms, activations and softmax, as torch does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported lazily, when counters are collected
    from torch._ops import OpOverloadPacket

#: Words in an op's name that mean matrix products or convolutions: an op with one of them and
#: no formula leaves the FLOP figure partial.
HEAVY_OP_WORDS = (
    "mm",
    "conv",
    "attention",
    "rnn",
    "lstm",
    "gru",
    "linear",
    "matmul",
    "_transformer",
    "einsum",
)

#: Version of the counting, stored with the counters (``flop_formulas``): counters without it
#: were counted before the formulas here, with these ops at 0 FLOPs.
FORMULAS_VERSION = 2
Shape = Sequence[int]


def _numel(shape: Shape) -> int:
    return math.prod(int(d) for d in shape)


def _shape(value: object) -> Shape | None:
    shape = getattr(value, "shape", value)
    if isinstance(shape, (tuple, list)) and all(isinstance(d, int) for d in shape):
        return tuple(shape)
    return None  # a nested tensor (padding mask fast path), a packed weight: no plain shape


def encoder_layer_flops(
    src: object,
    embed_dim: int,
    num_heads: int,
    qkv_weight: object,
    *args: object,
    **kwargs: object,
) -> int:
    """``aten::_transformer_encoder_layer_fwd``: QKV projection, scores, weighted values, output
    projection and the two feed-forward products, for ``src`` of shape (batch, length, embed)."""
    shape = _shape(src)
    ffn_1 = _shape(args[10]) if len(args) > 10 else _shape(kwargs.get("ffn_weight_1"))
    if shape is None or len(shape) != 3 or ffn_1 is None:
        return 0
    batch, length, embed = shape
    tokens, hidden = batch * length, ffn_1[0]
    projections = tokens * embed * (3 * embed + embed)
    attention = 2 * batch * length * length * embed
    feed_forward = 2 * tokens * embed * hidden
    return 2 * (projections + attention + feed_forward)


def multi_head_attention_flops(
    query: object, key: object, value: object, embed_dim: int, *args: object, **kwargs: object
) -> int:
    """``aten::_native_multi_head_attention``: Q, K, V and output projections, scores and
    weighted values, for (batch, length, embed) inputs."""
    q, k = _shape(query), _shape(key)
    if q is None or k is None or len(q) != 3 or len(k) != 3:
        return 0
    batch, q_len, embed = q
    k_len = k[1]
    projections = batch * embed * embed * (2 * q_len + 2 * k_len)
    attention = 2 * batch * q_len * k_len * embed
    return 2 * (projections + attention)


def sdpa_flops(query: object, key: object, value: object, *args: object, **kwargs: object) -> int:
    """``aten::_scaled_dot_product_flash_attention_for_cpu``: scores and weighted values for
    (batch, heads, length, head_dim) inputs (a causal mask is not discounted, as in torch's own
    attention formulas)."""
    q, k, v = _shape(query), _shape(key), _shape(value)
    if q is None or k is None or v is None or len(q) < 2:
        return 0
    rows = _numel(q[:-1])  # batch * heads * query length
    return 2 * rows * k[-2] * (q[-1] + v[-1])


def rnn_layer_flops(
    input: object, weight0: object, weight1: object, *args: object, **kwargs: object
) -> int:
    """``aten::mkldnn_rnn_layer`` (one layer, one direction of an LSTM/GRU/RNN on CPU): the
    input and recurrent products of every gate at every step."""
    x, w_ih, w_hh = _shape(input), _shape(weight0), _shape(weight1)
    if x is None or w_ih is None or w_hh is None or len(w_ih) != 2 or len(w_hh) != 2:
        return 0
    steps = _numel(x) // max(1, w_ih[1])  # sequence length * batch
    return 2 * steps * w_ih[0] * (w_ih[1] + w_hh[1])


def int_mm_flops(a: object, b: object, *args: object, **kwargs: object) -> int:
    """``aten::_int_mm``: an int8 matrix product, counted like ``aten::mm``."""
    left, right = _shape(a), _shape(b)
    if left is None or right is None or len(left) != 2 or len(right) != 2:
        return 0
    return 2 * left[0] * left[1] * right[1]


def quantized_linear_flops(x: object, packed: Any, *args: object, **kwargs: object) -> int:
    """``quantized::linear_dynamic`` / ``quantized::linear``: the product with the unpacked
    weight (raw arguments: the packed weight has no shape until unpacked).

    ``packed`` is ``Any``: a packed-params ``torch.ScriptObject``, whose methods torch does not
    declare (any other packing fails the call and counts nothing)."""
    try:
        weight = packed.unpack()[0]
    except Exception:  # noqa: BLE001 - any other packing: no shape to count, no FLOPs
        return 0
    shape, w = _shape(x), _shape(weight)
    if shape is None or w is None or len(w) != 2 or not shape:
        return 0
    return 2 * (_numel(shape) // max(1, w[1])) * w[0] * w[1]


#: Each op's namespace, name and formula, and whether the formula takes the raw arguments.
_FORMULAS: tuple[tuple[str, str, Callable[..., int], bool], ...] = (
    ("aten", "_transformer_encoder_layer_fwd", encoder_layer_flops, False),
    ("aten", "_native_multi_head_attention", multi_head_attention_flops, False),
    ("aten", "_scaled_dot_product_flash_attention_for_cpu", sdpa_flops, False),
    ("aten", "mkldnn_rnn_layer", rnn_layer_flops, False),
    ("aten", "_int_mm", int_mm_flops, False),
    ("quantized", "linear_dynamic", quantized_linear_flops, True),
    ("quantized", "linear", quantized_linear_flops, True),
)
#: The ops this module counts (``namespace::name``).
FORMULA_OPS = frozenset(f"{namespace}::{name}" for namespace, name, _, _ in _FORMULAS)


@functools.cache
def extra_formulas() -> dict[OpOverloadPacket, Callable[..., int]]:
    """The formulas above by op, for ``FlopCounterMode(custom_mapping=...)`` (ops this torch
    build does not have are left out). Built once per process: every measurement's counters
    use it; callers must not change it."""
    import torch

    formulas: dict[OpOverloadPacket, Callable[..., int]] = {}
    for namespace, name, formula, raw in _FORMULAS:
        try:
            op = getattr(getattr(torch.ops, namespace), name)
        except (AttributeError, RuntimeError):
            continue
        if raw:
            # FlopCounterMode hands shapes unless a formula asks for the arguments themselves.
            formula = _raw(formula)
        formulas[op] = formula
    return formulas


def _raw(formula: Callable[..., int]) -> Callable[..., int]:
    def raw(*args: object, **kwargs: object) -> int:
        kwargs.pop("out_val", None)
        kwargs.pop("out_shape", None)
        return formula(*args, **kwargs)

    raw._get_raw = True  # type: ignore[attr-defined]
    return raw


def without_formula(ops: Sequence[str], formulas: Iterable[object]) -> list[str]:
    """The heavy ops among ``ops`` (``aten::name`` strings) that no formula counts: the FLOP
    figure leaves their work out."""
    known = {str(op).replace(".", "::", 1) for op in formulas}
    return sorted(
        op
        for op in ops
        if op not in known and any(word in op.split("::", 1)[-1] for word in HEAVY_OP_WORDS)
    )
