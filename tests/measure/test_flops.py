"""FLOPs of the fused and fast-path ops users meet: each counted like the unfused ops it replaces
(real torch modules, tiny shapes), and a heavy op without a formula marks the figure partial."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.flop_counter import sdpa_flop_count

from pytest_torchperf.measure.counters import collect_counters
from pytest_torchperf.measure.flop_formulas import without_formula
from pytest_torchperf.report.terminal import format_flops


def _count(call) -> dict:
    return collect_counters(call, "cpu")


def test_a_fast_path_encoder_layer_counts_what_its_unfused_path_counts() -> None:
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        fast = _count(lambda: layer(x))
    assert fast["ops"] == {"aten::_transformer_encoder_layer_fwd": 1}  # really the fast path
    slow = _count(lambda: layer(x))  # grad enabled: the layer runs its unfused ops
    assert "aten::_transformer_encoder_layer_fwd" not in slow["ops"]
    tokens, e, f, length = 2 * 16, 64, 128, 16
    expected = 2 * (tokens * e * 4 * e + 2 * 2 * length * length * e + 2 * tokens * e * f)
    assert fast["flops"] == slow["flops"] == expected
    assert "flops_partial" not in fast


def test_fast_path_multi_head_attention_and_cpu_sdpa() -> None:
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        fast = _count(lambda: mha(x, x, x, need_weights=False))
    assert fast["ops"] == {"aten::_native_multi_head_attention": 1}
    assert fast["flops"] == _count(lambda: mha(x, x, x, need_weights=False))["flops"] > 0
    q, k = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 24, 8)
    sdpa = _count(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, k))
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in sdpa["ops"]
    assert sdpa["flops"] == sdpa_flop_count(q.shape, k.shape, k.shape)  # torch's own formula


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_count_every_gate_at_every_step(kind: str) -> None:
    layer = getattr(torch.nn, kind)(32, 64, batch_first=True).eval()
    x = torch.randn(4, 16, 32)
    counted = _count(lambda: layer(x))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    # Input and recurrent products of every gate, every step (LSTM runs mkldnn's fused layer;
    # GRU and RNN run addmm per step on this build, counted by torch's own formulas).
    assert counted["flops"] == 2 * 4 * 16 * gates * 64 * (32 + 64)
    assert "flops_partial" not in counted


def test_quantized_ops_are_counted() -> None:
    a = torch.randint(-128, 127, (32, 64), dtype=torch.int8)
    b = torch.randint(-128, 127, (64, 48), dtype=torch.int8)
    assert _count(lambda: torch._int_mm(a, b))["flops"] == 2 * 32 * 64 * 48
    with warnings.catch_warnings():  # torch.ao's deprecation notice (it points to torchao)
        warnings.simplefilter("ignore")
        linear = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(torch.nn.Linear(64, 16)), {torch.nn.Linear}, dtype=torch.qint8
        )
    x = torch.randn(8, 64)
    counted = _count(lambda: linear(x))
    assert "quantized::linear_dynamic" in counted["ops"]
    assert counted["flops"] == 2 * 8 * 64 * 16


def test_a_heavy_op_without_a_formula_marks_the_figure_partial_in_reports() -> None:
    ops = ["aten::addmm", "aten::_weight_int8pack_mm", "aten::relu", "aten::quantized_gru_cell"]
    registry = [torch.ops.aten.addmm, torch.ops.aten.mm]
    assert without_formula(ops, registry) == [
        "aten::_weight_int8pack_mm",
        "aten::quantized_gru_cell",
    ]
    text = format_flops({"flops": 4096, "flops_partial": ["aten::_weight_int8pack_mm"]})
    assert text == ">= 4,096 (partial: no FLOP formula for aten::_weight_int8pack_mm)"
    assert format_flops({"flops": 4096}) == "4,096"
