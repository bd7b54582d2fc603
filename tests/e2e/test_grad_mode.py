"""Perf tests leave autograd as the test had it: training steps and whole test bodies keep
gradients; state built while measuring stays usable for training."""

from __future__ import annotations

import pytest


# test_whole_body_backward is a whole test body (cuda on a GPU machine); autograd is checked.
@pytest.mark.any_device
def test_training_steps_and_test_bodies_keep_autograd(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import pytest, torch

        @pytest.mark.torchperf
        def test_whole_body_backward():
            model = torch.nn.Linear(8, 8)
            model(torch.randn(4, 8)).sum().backward()
            assert model.weight.grad is not None

        def test_train_step(torchperf):
            model = torch.nn.Linear(8, 8)
            x = torch.randn(4, 8)
            def step():
                model.zero_grad()
                model(x).sum().backward()
            torchperf(step, name="step")
    """)
    perf.runpytest().assert_outcomes(passed=2)
    perf.runpytest("--torchperf-disable").assert_outcomes(passed=2)


def test_state_built_while_measuring_is_usable_for_training(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch

        class Lazy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
                self.cache = None
            def forward(self, x):
                if self.cache is None:
                    self.cache = torch.arange(8.0)
                return self.fc(x) + self.cache

        def test_lazy(torchperf):
            model = Lazy()
            torchperf(model, torch.randn(2, 8))
            assert model.training  # restored
            model(torch.randn(2, 8)).sum().backward()
    """)
    perf.runpytest().assert_outcomes(passed=1)


def test_a_module_that_refuses_eval_is_measured_under_no_grad(perf: pytest.Pytester) -> None:
    """torchperf_quantized_model's static PT2E int8 model is an exported program's module,
    whose train()/eval() raise NotImplementedError: timing it raised that from the plugin's own
    prepared() (newcomer pass). It is measured as it is, under no_grad."""
    perf.makepyfile("""
        import torch

        class Exported(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def train(self, mode=True):
                raise NotImplementedError("Calling train() or eval() is not supported for exported models.")

            def forward(self, x):
                assert not torch.is_grad_enabled()
                return self.lin(x)

        def test_exported(torchperf):
            torchperf(Exported(), torch.randn(2, 8), name="exported")
    """)
    perf.runpytest().assert_outcomes(passed=1)
