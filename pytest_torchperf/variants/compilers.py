"""What ``torch.compile`` can do here: backend and C++-compiler probes, and compile isolation.

A variant that needs a backend this machine lacks must be *skipped with the reason*, never
silently measured as eager; these probes supply the reason. Each probe runs once per process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
from collections.abc import Iterator

#: Packages that register a ``torch.compile`` backend when imported (backend name -> module).
BACKEND_PACKAGES = {
    "tensorrt": ("torch_tensorrt", "pip install torch-tensorrt (needs an NVIDIA GPU)"),
    "torch_tensorrt": ("torch_tensorrt", "pip install torch-tensorrt (needs an NVIDIA GPU)"),
    "openvino": ("openvino.torch", "pip install openvino"),
    "ipex": ("intel_extension_for_pytorch", "pip install intel-extension-for-pytorch"),
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


@contextlib.contextmanager
def without_log_line(logger: str, text: str) -> Iterator[None]:
    """The records of the logger named ``logger`` whose message contains ``text`` dropped within
    the block; every other record, and that logger outside the block, untouched."""
    log = logging.getLogger(logger)
    log.addFilter(keep := lambda record: text not in record.getMessage())
    try:
        yield
    finally:
        log.removeFilter(keep)


@functools.cache  # once per process: the module is then imported
def quiet_cpp_extension() -> None:
    """Import ``torch.utils.cpp_extension`` without the line it logs once, at import, on a CUDA
    build of torch without a GPU (the default wheel on a CPU-only CI machine): "No CUDA runtime is
    found, using CUDA_HOME=...". It is about building CUDA extensions, which we never do, but
    ``torch.utils.benchmark`` and inductor import the module, so the line showed in the captured
    output of every failing perf test. Imported here first, the module is not imported again."""
    with without_log_line("torch.utils.cpp_extension", "No CUDA runtime is found"):
        import torch.utils.cpp_extension  # noqa: F401


@functools.cache
def inductor_problem(device_type: str) -> str | None:
    """Why inductor cannot compile for ``device_type`` here (None when it can).

    Compiles ``x + 1`` once: on CPU this needs a working C++ compiler (inductor writes C++), on CUDA
    a working Triton.
    """
    import torch

    if device_type == "mps":
        return "torch.compile on mps is experimental in torch 2.14; not measured"
    if device_type not in ("cpu", "cuda"):
        return f"inductor does not support device type {device_type!r} here"
    quiet_cpp_extension()  # inductor imports it
    try:
        fn = torch.compile(lambda x: x + 1, backend="inductor", fullgraph=True)
        fn(torch.ones(4, device=device_type))
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot compile here"
        hint = (
            " (install g++ or set CXX)" if device_type == "cpu" else " (check the Triton install)"
        )
        return f"torch.compile(backend='inductor') does not work here: {_first_line(exc)}{hint}"
    finally:
        torch._dynamo.reset()
    return None


def backend_problem(backend: object, device_type: str) -> str | None:
    """Why the ``torch.compile`` backend cannot be used here (None when it can)."""
    import torch

    if callable(backend) and not isinstance(backend, str):
        return None  # a user-supplied backend function
    name = str(backend)
    if name == "inductor":
        return inductor_problem(device_type)
    available = set(torch._dynamo.list_backends(exclude_tags=()))
    if name not in available and name in BACKEND_PACKAGES:
        module, install = BACKEND_PACKAGES[name]
        try:
            importlib.import_module(module)  # registers the backend as a side effect
        except Exception as exc:  # noqa: BLE001
            return f"backend {name!r} is not installed ({_first_line(exc)}); {install}"
        available = set(torch._dynamo.list_backends(exclude_tags=()))
    if name not in available:
        return (
            f"torch.compile backend {name!r} is not registered here; available: "
            f"{', '.join(sorted(available))}"
        )
    return None
