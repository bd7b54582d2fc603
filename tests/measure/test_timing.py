"""Device inference of the timer (torch, no pytester)."""

from __future__ import annotations


def test_device_is_taken_from_parameters_before_inputs() -> None:
    import torch

    from pytest_torchperf.measure.timing import infer_device

    model = torch.nn.Linear(2, 2)
    assert infer_device(model, (torch.empty(1, 2, device="meta"),)) == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert infer_device(lambda: None, ()).startswith(expected)  # closures: the real accelerator
