"""Noise-free counters: FLOPs, ATen operator counts, parameters and peak tensor memory.

They carry no timing noise, so they gate on any shared CPU runner where timing gates are weak.
:func:`collect_counters` (torch, lazily imported) runs the target once under dispatch modes;
:func:`~pytest_torchperf.judge.counter_diff.diff_counters` compares two counter dicts and words
every change precisely
(``ops changed: aten::addmm 2 -> 3, new aten::copy_ x4; FLOPs +33.1%``).
"""

from __future__ import annotations

import collections
import gc
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.types import Target, UserValue

if TYPE_CHECKING:  # torch is imported lazily, when counters are collected
    from torch._ops import OpOverload
    from torch.utils._python_dispatch import TorchDispatchMode


@dataclass
class _Tally:
    """What :func:`_counting`'s dispatch mode saw: ATen operator calls by overload packet
    (``aten::addmm``), the dtypes of the tensors they produced (tells fp32 code from
    low-precision code), and the high-water mark of tensor storages allocated inside the region
    (freed via weakref)."""

    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    dtypes: set[str] = field(default_factory=set)
    live: dict[int, int] = field(default_factory=dict)
    current: int = 0
    peak: int = 0

    def free(self, ptr: int) -> None:
        self.current -= self.live.pop(ptr, 0)


def collect_counters(
    call: Callable[[], UserValue], device: str, module: UserValue = None
) -> dict[str, Any]:
    """Run ``call`` once and count FLOPs, ATen ops and peak tensor memory; count ``module``'s params.

    CPU peak memory is the high-water mark of tensor storages created during the call (a
    dispatch-level tracker: ``tracemalloc`` cannot see tensors). CUDA peak memory is
    ``max_memory_allocated`` above the memory allocated before the call, after resetting peaks;
    garbage is collected first and the collector paused during the call: a collection inside it
    frees tensors counted in "before" (cyclic garbage of an earlier test, e.g. frames a skip's
    traceback holds) and lowers the figure by their size. The likely cause of a GPU compare's
    false "peak memory +62.7 % (4.9 -> 8.0 MiB)" on unchanged code, 3.1 MiB apart: about what
    the skipped test before it held on the GPU (its 3 MiB input and its model).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    from pytest_torchperf.measure.flop_formulas import (
        FORMULAS_VERSION,
        extra_formulas,
        without_formula,
    )

    dev = torch.device(device)
    on_cuda = dev.type == "cuda" and torch.cuda.is_available()
    collecting = on_cuda and gc.isenabled()
    if on_cuda:
        gc.collect()
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
    tally = _Tally()
    formulas = extra_formulas()
    if collecting:
        gc.disable()
    try:
        with (
            FlopCounterMode(display=False, custom_mapping=formulas) as flops_mode,
            _counting(tally),
        ):
            output = call()
    finally:
        if collecting:
            gc.enable()
    if on_cuda:
        torch.cuda.synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - before
    else:
        peak = tally.peak
    del output
    params = param_bytes = 0
    if isinstance(module, torch.nn.Module):
        for tensor in (*module.parameters(), *module.buffers()):
            params += tensor.numel()
            param_bytes += tensor.numel() * tensor.element_size()
    # Heavy ops no formula counts: the FLOP figure leaves them out, and every report says so.
    partial = without_formula(list(tally.counts), [*flop_registry, *formulas])
    return {
        "flops": int(flops_mode.get_total_flops()),
        "flop_formulas": FORMULAS_VERSION,
        **({"flops_partial": partial} if partial else {}),
        "ops": dict(sorted(tally.counts.items())),
        "params": params,
        "param_bytes": param_bytes,
        "peak_memory": int(peak),
        "dtypes": sorted(tally.dtypes),
    }


def collect_op_counts(call: Callable[[], UserValue]) -> tuple[dict[str, Any], UserValue]:
    """Run ``call`` once and count only its ATen ops and the dtypes they produced (a variant keeps
    its model's ops: no FLOP formulas, parameters or memory, so the count costs about a call);
    returns them and the call's output."""
    tally = _Tally()
    with _counting(tally):
        output = call()
    return {"ops": dict(sorted(tally.counts.items())), "dtypes": sorted(tally.dtypes)}, output


def compiled_original(target: object) -> Target | None:
    """The eager callable behind a ``torch.compile``d module or function, else None."""
    original = getattr(target, "_orig_mod", None)
    if original is None:
        original = getattr(target, "_torchdynamo_orig_callable", None)
    return original


def graph_counters(
    original: Target, inputs: Sequence[UserValue], kwargs: Mapping[str, UserValue]
) -> dict[str, Any]:
    """Graph count and graph breaks of what ``torch.compile`` captures from ``original``.

    Uses ``torch._dynamo.explain``, which re-traces independently of compile caches, so the figures
    are the same whatever was compiled before in the process. Must run *before* the compiled target
    is first called: explain invalidates the compiled frame's cache entry.
    """
    import torch

    explanation = torch._dynamo.explain(original)(*inputs, **kwargs)
    reasons = [str(b.reason).splitlines()[0][:120] for b in explanation.break_reasons]
    return {
        "graphs": int(explanation.graph_count),
        "graph_breaks": int(explanation.graph_break_count),
        "break_reasons": reasons[:3],
    }


def dynamo_graph_total() -> int:
    """Process-wide count of graphs dynamo compiled so far (its ``unique_graphs`` counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _counting(tally: _Tally) -> TorchDispatchMode:
    """A dispatch mode keeping ``tally`` (see :class:`_Tally`)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(
            self,
            func: OpOverload,
            types: Sequence[type],
            args: Sequence[object] = (),
            kwargs: Mapping[str, object] | None = None,
        ) -> object:
            tally.counts[str(func.overloadpacket).replace(".", "::", 1)] += 1
            out = func(*args, **(kwargs or {}))
            # Outputs sharing an input's storage (views, in-place ops) allocated nothing new.
            existing = {
                t.untyped_storage().data_ptr()
                for t in tree_leaves((args, kwargs))
                if isinstance(t, torch.Tensor) and not t.is_meta
            }
            for tensor in tree_leaves(out):
                if not isinstance(tensor, torch.Tensor):
                    continue
                tally.dtypes.add(str(tensor.dtype).removeprefix("torch."))
                if tensor.is_meta:
                    continue
                storage = tensor.untyped_storage()
                ptr, size = storage.data_ptr(), storage.nbytes()
                if size == 0 or ptr in existing or ptr in tally.live:
                    continue
                tally.live[ptr] = size
                tally.current += size
                tally.peak = max(tally.peak, tally.current)
                weakref.finalize(storage, tally.free, ptr)
            return out

    return Counting()  # type: ignore[no-untyped-call]
