"""Process-global torch state that variants (and users) change, saved before a perf test and
restored after it, so one test's compile/quantize/AMP work cannot change the next test's numbers.

Saved: intra-op threads, grad mode, default dtype, deterministic-algorithms flags, cuDNN flags,
float32 matmul precision, the quantized engine, and (when loaded) inductor's and dynamo's config.
After a test that built compiled variants, dynamo's caches and counters are also reset: cache
entries pile up per code object (8 at most, then dynamo falls back to eager silently) and a later
``torch.compile`` of another instance of the same class would reuse this test's graph.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily, by the first perf test
    import torch

#: What a process's first perf test imports (about 2.5 s here, mostly the compiler configs).
PRELOAD = (
    "torch._inductor.config",
    "torch._dynamo.config",
    "torch.utils.flop_counter",
    "torch.profiler",
)
#: The compiler configs saved and restored, where loaded.
CONFIGS = ("torch._inductor.config", "torch._dynamo.config")


def preload() -> None:
    """Import now what the first measurement would (A/B sides do it while both start up, so it
    is not paid one side after the other)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


@dataclass(frozen=True)
class TorchState:
    """What :func:`snapshot` saw of torch's process-global state (in memory only)."""

    threads: int
    grad: bool
    dtype: torch.dtype
    #: ``use_deterministic_algorithms``: (enabled, warn_only).
    deterministic: tuple[bool, bool]
    #: cuDNN's benchmark, deterministic, enabled and allow_tf32, and CUDA matmul's allow_tf32.
    cudnn: tuple[bool, bool, bool, bool, bool]
    matmul: str
    qengine: str
    #: A copy of inductor's and dynamo's config, by module name.
    configs: dict[str, dict[str, object]]


@dataclass(frozen=True)
class RandomStates:
    """The random generators' states :func:`seed_everything` replaced (in memory only)."""

    torch_rng: torch.Tensor
    #: ``random.getstate()``.
    random_rng: tuple[object, ...]
    #: ``numpy.random.get_state()`` where numpy was imported (numpy is not typed here).
    numpy_rng: object = None
    #: Every CUDA device's generator state, where CUDA is available.
    cuda_rng: list[torch.Tensor] | None = None


def snapshot() -> TorchState:
    """The current global state (imports torch and its compiler configs: a perf test will)."""
    import importlib

    import torch

    # Imported here so a config first loaded (and changed) inside the test is restored too.
    configs = {name: importlib.import_module(name).get_config_copy() for name in CONFIGS}
    return TorchState(
        threads=torch.get_num_threads(),
        grad=torch.is_grad_enabled(),
        dtype=torch.get_default_dtype(),
        deterministic=(
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        cudnn=(
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
            torch.backends.cudnn.enabled,
            torch.backends.cudnn.allow_tf32,
            torch.backends.cuda.matmul.allow_tf32,
        ),
        matmul=torch.get_float32_matmul_precision(),
        qengine=torch.backends.quantized.engine,
        configs=configs,
    )


def restore(state: TorchState | None, *, reset_dynamo: bool = False) -> None:
    """Put back what :func:`snapshot` saw; optionally reset dynamo caches and counters."""
    import torch

    if state is not None:
        _restore_values(state)
    if reset_dynamo and "torch._dynamo" in sys.modules:
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()


def _restore_values(state: TorchState) -> None:
    import torch

    if torch.get_num_threads() != state.threads:
        torch.set_num_threads(state.threads)
    torch.set_grad_enabled(state.grad)
    torch.set_default_dtype(state.dtype)
    enabled, warn_only = state.deterministic
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    (
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.enabled,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.allow_tf32,
    ) = state.cudnn
    if torch.get_float32_matmul_precision() != state.matmul:
        torch.set_float32_matmul_precision(state.matmul)
    if torch.backends.quantized.engine != state.qengine:
        torch.backends.quantized.engine = state.qengine
    for name in CONFIGS:
        module = sys.modules.get(name)
        if module is not None and name in state.configs:
            # Only keys that changed: writing every key would trip deprecation warnings.
            current = module.get_config_copy()
            for key, value in state.configs[name].items():
                if current.get(key, value) is not value and current.get(key) != value:
                    setattr(module, key, value)


def seed_everything(seed: int) -> RandomStates:
    """Seed torch (all devices), ``random`` and numpy (if imported); return the states replaced."""
    import random

    import torch

    saved = RandomStates(torch.get_rng_state(), random.getstate())
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        saved = replace(saved, numpy_rng=numpy.random.get_state())
        numpy.random.seed(seed)
    if torch.cuda.is_available():
        saved = replace(saved, cuda_rng=torch.cuda.get_rng_state_all())
    random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA/MPS generators too
    return saved


def restore_random(saved: RandomStates) -> None:
    """Undo :func:`seed_everything`."""
    import random

    import torch

    torch.set_rng_state(saved.torch_rng)
    random.setstate(saved.random_rng)
    if saved.numpy_rng is not None and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(saved.numpy_rng)
    if saved.cuda_rng is not None:
        torch.cuda.set_rng_state_all(saved.cuda_rng)


def quiet_trace_logger() -> None:
    """torch's structured-trace logger writes DEBUG records meant for TORCH_TRACE files only.

    torch 2.14 stops them at ``torch.__trace`` (``propagate=False``); torch 2.11 (seen on a CUDA
    machine) let them reach the root logger, and pytest's log capture printed ~1,300 empty
    ``DEBUG torch.__trace`` lines under failing and ``-rA`` tests of one small run. Setting
    ``propagate`` alone did not hold there (torch re-initialises its loggers), so without
    TORCH_TRACE a filter drops them at the logger itself: they had nowhere to go anyway.
    """
    import logging
    import os

    log = logging.getLogger("torch.__trace")
    log.propagate = False
    if not os.environ.get("TORCH_TRACE") and not any(
        getattr(f, "torchperf", False) for f in log.filters
    ):
        drop = logging.Filter("torchperf-drops-everything")
        drop.filter = lambda record: False  # type: ignore[method-assign]
        drop.torchperf = True  # type: ignore[attr-defined]
        log.addFilter(drop)
