"""Environment fingerprints: which baselines are comparable with a measurement taken here.

Timings are only comparable on the same hardware and software (other CPUs speed up other ops
by other factors; contended sessions here ran 2-3.5x slower), so every baseline is
filed under an *environment id* derived from the exact-match fields below. Soft fields (hostname,
Python version) are stored for display only. torch is imported lazily, inside the functions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_torchperf.core.types import JSON

if TYPE_CHECKING:
    import subprocess

    import torch

#: An environment's fingerprint: ``{"exact": {...}, "soft": {...}}``, each a JSON object of
#: fields (see :data:`EXACT_FIELDS`, :data:`SOFT_FIELDS`).
Fingerprint = dict[str, dict[str, JSON]]

#: Fields that must match for two measurements to be comparable, in the order hints mention them.
EXACT_FIELDS: tuple[str, ...] = (
    "device",
    "device_name",
    "device_memory_gib",
    "cuda",
    "cudnn",
    "torch",
    "torch_git",
    "blas",
    "onednn",
    "cpu_capability",
    "cpu_model",
    "cpu_isa",
    "cpu_count",
    "threads",
)

#: Added to the exact fields of an instruction-count environment (``--torchperf-instructions``):
#: the Valgrind version and the CPU capability torch dispatched to under it (Valgrind does not
#: emulate AVX-512 or AMX, so AVX2 on such hosts) and the ISA caps oneDNN and MKL ran with there
#: (``kinds.instructions.measure_callgrind.KERNEL_CAPS``). Kept out of EXACT_FIELDS, whose hash names the timing
#: environments already stored.
INSTRUCTION_FIELDS: tuple[str, ...] = ("valgrind", "counted_capability", "kernel_caps")
#: Prefix of an instruction-count environment's id (its folder under the storage).
INSTRUCTION_ENV_PREFIX = "instructions-"


def environment_mode(env_id: str) -> str:
    """What an environment's baselines gate: ``"instructions"`` (counted under Valgrind) or
    ``"time"``."""
    return "instructions" if env_id.startswith(INSTRUCTION_ENV_PREFIX) else "time"


#: ISA flags that change which kernels torch picks (from /proc/cpuinfo).
_ISA_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
)


def _cpu_info() -> tuple[str, str]:
    """CPU model string and the relevant ISA flags."""
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Hardware", "CPU part") and model in (
                    "",
                    platform.machine(),
                ):
                    model = value.strip() or model
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                if model not in ("", platform.machine()) and flags:
                    break
    except OSError:
        pass
    if sys.platform == "darwin" and not flags:  # pragma: no cover - macOS
        model = model or "apple"
    isa = ",".join(f for f in _ISA_FLAGS if f in flags)
    return model, isa


def _build_line(config_text: str, pattern: str) -> str | None:
    match = re.search(pattern, config_text)
    return match.group(1) if match else None


@functools.lru_cache(maxsize=1)
def machine_fields() -> dict[str, JSON]:
    """Device-independent exact fields: CPU and torch build (cached for the process)."""
    import torch

    model, isa = _cpu_info()
    config_text = torch.__config__.show()
    blas = _build_line(config_text, r"BLAS_INFO=([^,\s]+)")
    mkl = _build_line(config_text, r"Math Kernel Library Version ([0-9.]+)")
    return {
        "torch": torch.__version__,
        "torch_git": (torch.version.git_version or "")[:12],
        "blas": f"{blas} {mkl}" if blas and mkl else blas,
        "onednn": _build_line(config_text, r"MKL-DNN v([0-9.]+)"),
        "cpu_capability": _build_line(config_text, r"CPU capability usage: (\S+)"),
        "cpu_model": model,
        "cpu_isa": isa,
        "cpu_count": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
    }


def device_fields(device: torch.device | str) -> dict[str, JSON]:
    """Exact fields of the device a measurement ran on (GPU name, memory, CUDA and cuDNN)."""
    import torch

    dev = torch.device(device)
    fields: dict[str, JSON] = {
        "device": dev.type,
        "device_name": None,
        "device_memory_gib": None,
        "cuda": None,
        "cudnn": None,
    }
    if dev.type == "cuda" and torch.cuda.is_available():
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        fields.update(
            device_name=props.name,
            device_memory_gib=round(props.total_memory / 2**30),
            cuda=torch.version.cuda or getattr(torch.version, "hip", None),
            cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        )
    elif dev.type == "mps":
        fields["device_name"] = "apple-mps"
    return fields


#: Fingerprint fields that never separate environments (recorded for the reader only).
SOFT_FIELDS = (
    "hostname",
    "python",
    "platform",
    "pytest_torchperf",
    "gpu_driver",
    "gpu_max_sm_mhz",
    "gpu_power_limit_w",
    "gpu_persistence",
)


def fingerprint(device: torch.device | str, threads: int) -> Fingerprint:
    """Full fingerprint of a measurement: ``{"exact": {...}, "soft": {...}}``."""
    from pytest_torchperf import __version__

    found: dict[str, JSON] = {**machine_fields(), **device_fields(device), "threads": threads}
    exact = {key: found.get(key) for key in EXACT_FIELDS}
    soft: dict[str, JSON] = {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "pytest_torchperf": __version__,
    }
    if exact.get("device") == "cuda":
        from pytest_torchperf.measure.gpu_clocks import device_state

        soft.update(device_state(str(device)))  # driver, clocks, power limit: for the reader
    return {"exact": exact, "soft": soft}


def environment_id(exact: Mapping[str, object]) -> str:
    """Stable, readable folder name for an exact fingerprint (``cpu-intel-xeon-torch2.14.1-t1-1a2b3c4d``)."""
    digest = hashlib.sha256(
        json.dumps(dict(exact), sort_keys=True, default=str).encode()
    ).hexdigest()[:8]
    hardware = exact.get("device_name") or exact.get("cpu_model") or "unknown"
    slug = re.sub(r"(intel|amd|\(r\)|\(tm\)|processor|cpu|@.*)", " ", str(hardware).lower())
    slug = re.sub(r"[^a-z0-9]+", "-", slug).strip("-")[:24].strip("-") or "hw"
    torch_version = str(exact.get("torch", "")).split("+")[0]
    return (
        f"{exact.get('device', 'cpu')}-{slug}-torch{torch_version}-t{exact.get('threads')}-{digest}"
    )


def describe_difference(here: Mapping[str, object], stored: Mapping[str, object]) -> str:
    """Name the exact fields that differ: ``torch 2.14.1 here vs 2.13.0 stored; threads 1 here vs 4 stored``
    (the plugin's fields first, then those other plugins added: ``pytest_torchperf_environment``)."""
    known = (*EXACT_FIELDS, *INSTRUCTION_FIELDS)
    added = sorted(k for k in {*here, *stored} if k not in known and k not in SOFT_FIELDS)
    diffs = [
        f"{key} {here.get(key)} here vs {stored.get(key)} stored"
        for key in (*known, *added)
        if here.get(key) != stored.get(key)
    ]
    return (
        "; ".join(diffs)
        if diffs
        else "fingerprints match but ids differ (stored by another version?)"
    )


def machine_info() -> dict[str, JSON]:
    """pytest-benchmark-style ``machine_info`` plus the torch build fields."""
    uname = platform.uname()
    info: dict[str, JSON] = {
        "node": uname.node,
        "processor": uname.processor,
        "machine": uname.machine,
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": uname.release,
        "system": uname.system,
    }
    try:
        fields = machine_fields()
        isa = fields["cpu_isa"]  # always a text (_cpu_info)
        flags: list[JSON] = list(isa.split(",")) if isinstance(isa, str) else []
        info["cpu"] = {
            "brand_raw": fields["cpu_model"],
            "flags": flags,
            "count": fields["cpu_count"],
        }
        info["torch"] = {
            key: fields[key] for key in ("torch", "torch_git", "blas", "onednn", "cpu_capability")
        }
    except ImportError:  # pragma: no cover - torch is loaded whenever there are records
        pass
    return info


class GitError(Exception):
    """git could not run (not on PATH: :attr:`missing`) or did not finish within its limit; the
    message says which."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def run_git(
    args: Sequence[str], cwd: Path | str | None = None, timeout: float = 5.0
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd`` (None: the current folder), output captured, killed after
    ``timeout`` seconds: the one place this package runs git. A hung git (a lock left by a
    killed one, a network file system) must not hold a test run forever. Raises
    :class:`GitError`; git's own failure is its return code."""
    import subprocess

    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise GitError("git is not on PATH", missing=True) from None
    except subprocess.TimeoutExpired:
        raise GitError(
            f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s in "
            f"{cwd or os.getcwd()}"
        ) from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git {' '.join(args[:2])} could not run ({exc})") from None


def git(*args: str) -> str | None:
    """Output of ``git ARGS`` in the current folder, or None (no git, not a repository, error;
    5 s at most: it only labels the results)."""
    try:
        out = run_git(args)
    except GitError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def commit_info() -> dict[str, JSON]:
    """pytest-benchmark-style ``commit_info`` of the working tree (empty fields outside git)."""
    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "id": sha,
        "time": git("log", "-1", "--format=%cI") if sha else None,
        "author_time": git("log", "-1", "--format=%aI") if sha else None,
        "dirty": bool(status) if sha else None,  # clean tree: empty status output -> False
        "project": os.path.basename(git("rev-parse", "--show-toplevel") or os.getcwd()),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
    }
