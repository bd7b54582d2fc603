"""The accuracy metrics and output fingerprints of pytest_torchperf.measure.accuracy, on real
tensors (torch, no pytester)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from pytest_torchperf.measure.accuracy import (
    OutputMismatchError,
    compare_outputs,
    fingerprint,
    fingerprint_drift,
)


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    aux: dict


def test_compare_outputs_metrics_on_nested_outputs() -> None:
    ref = Out(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), {"k": (torch.ones(2), 5)})
    same = compare_outputs(ref, ref)
    assert same["rel_l2"] == 0.0 and same["max_abs"] == 0.0 and same["top1"] == 1.0
    assert math.isclose(same["cosine"], 1.0)
    moved = Out(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 4.0]]), {"k": (torch.ones(2), 5)})
    metrics = compare_outputs(ref, moved)
    ref_norm = math.sqrt(1 + 4 + 9 + 9 + 4 + 1 + 1 + 1 + 25)
    assert math.isclose(metrics["rel_l2"], 3.0 / ref_norm)
    assert metrics["max_abs"] == 3.0
    assert metrics["top1"] == 0.5  # the second row's argmax moved
    assert metrics["n"] == 9


def test_compare_outputs_rejects_structure_and_shape_changes() -> None:
    with pytest.raises(
        OutputMismatchError,
        match=r"only the variant has out\[1\] \(1,\) "
        r"\(1 vs 2 output tensors\)",
    ):
        compare_outputs((torch.ones(2),), (torch.ones(2), torch.ones(1)))
    with pytest.raises(
        OutputMismatchError,
        match=r"out\['a'\]: shape \(3,\) in the variant vs "
        r"\(2,\) in eager",
    ):
        compare_outputs({"a": torch.ones(2)}, {"a": torch.ones(3)})


def test_a_detection_output_with_another_number_of_boxes_names_the_leaf_and_both_shapes() -> None:
    """Detection models return as many boxes as pass their threshold: a variant may keep fewer.
    The message names the leaf and both shapes, never a rel-L2 over misaligned boxes."""
    eager = [{"boxes": torch.ones(9, 4), "scores": torch.ones(9), "labels": torch.ones(9).long()}]
    variant = [{"boxes": torch.ones(7, 4), "scores": torch.ones(7), "labels": torch.ones(7).long()}]
    with pytest.raises(OutputMismatchError) as info:
        compare_outputs(eager, variant)
    message = str(info.value)
    assert message.startswith("out[0]['boxes']: shape (7, 4) in the variant vs (9, 4) in eager")
    assert "measure a fixed-size output" in message and "rel" not in message


def test_low_precision_outputs_are_compared_in_float64() -> None:
    ref = torch.linspace(-3, 3, 100)
    metrics = compare_outputs(ref, ref.to(torch.bfloat16))
    assert 0 < metrics["rel_l2"] < 1e-2


def test_fingerprint_drift_sees_small_changes_and_shape_changes() -> None:
    torch.manual_seed(0)
    out = {"logits": torch.randn(4, 10), "ids": torch.arange(4)}
    fp = fingerprint(out)
    assert [leaf["path"] for leaf in fp["leaves"]] == ["out['logits']", "out['ids']"]
    assert len(fp["leaves"][0]["probe"]) == 16
    assert fingerprint_drift(fp, fingerprint(out)) == (0.0, None)
    nudged = {"logits": out["logits"] * (1 + 1e-3), "ids": out["ids"]}
    drift, problem = fingerprint_drift(fp, fingerprint(nudged))
    assert problem is None and 5e-4 < drift < 2e-3
    drift, problem = fingerprint_drift(
        fp, fingerprint({"logits": torch.randn(4, 12), "ids": out["ids"]})
    )
    assert drift == math.inf
    assert problem == "out['logits']: shape (4, 12) in this run vs (4, 10) in the baseline"


def test_compare_outputs_reports_the_reference_scale() -> None:
    ref = torch.tensor([1e-9, -2e-9, float("inf")])
    metrics = compare_outputs(ref, ref * 2)
    assert metrics["ref_nonfinite"] == 1.0
    assert metrics["ref_max_abs"] == pytest.approx(2e-9)
    assert metrics["ref_range"] == pytest.approx(3e-9)


def test_integer_outputs_are_counted_as_compared_and_none_compares_nothing() -> None:
    """A variant returning labels was called "no values" (n counts floating values only)."""
    import torch

    from pytest_torchperf.judge.numerics import degenerate_reference

    labels = compare_outputs(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3]))
    assert labels["n_int"] == 3 and labels["int_mismatch"] == 1
    assert degenerate_reference(labels) is None
    nothing = compare_outputs(None, None)
    assert nothing["n"] == 0 and nothing["n_int"] == 0 and degenerate_reference(nothing)
