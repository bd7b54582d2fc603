"""Unit tests of the pure parts of pytest_torchperf.store.environment: environment_id, describe_difference.

fingerprint() and machine_fields() import torch and read the machine; they are not exercised here.
"""

from __future__ import annotations

import re

import pytest

from pytest_torchperf.store.environment import EXACT_FIELDS, describe_difference, environment_id


def exact(**overrides) -> dict:
    base = {
        "device": "cpu",
        "device_name": None,
        "device_memory_gib": None,
        "cuda": None,
        "cudnn": None,
        "torch": "2.14.1+cpu",
        "torch_git": "0123456789ab",
        "blas": "mkl 2024.2",
        "onednn": "3.5.3",
        "cpu_capability": "AVX512",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz",
        "cpu_isa": "avx2,avx512f",
        "cpu_count": 16,
        "threads": 1,
    }
    base.update(overrides)
    return base


def gpu(**overrides) -> dict:
    return exact(
        device="cuda",
        device_name="NVIDIA H100 80GB HBM3",
        device_memory_gib=80,
        cuda="12.8",
        cudnn=91000,
        **overrides,
    )


ID_RE = re.compile(r"^[a-z0-9]+-[a-z0-9-]+-torch[0-9a-z.]*-t[^-]+-[0-9a-f]{8}$")


def test_exact_fields():
    assert EXACT_FIELDS[0] == "device"
    assert "torch" in EXACT_FIELDS and "threads" in EXACT_FIELDS and "cpu_model" in EXACT_FIELDS
    assert len(set(EXACT_FIELDS)) == len(EXACT_FIELDS)


def test_environment_id_cpu_is_readable():
    env_id = environment_id(exact())
    assert env_id.startswith("cpu-xeon-platinum-8480-torch2.14.1-t1-")
    assert ID_RE.match(env_id), env_id


def test_environment_id_strips_vendor_noise():
    env_id = environment_id(exact(cpu_model="AMD EPYC 7763 64-Core Processor"))
    assert env_id.startswith("cpu-epyc-7763-64-core-torch2.14.1-t1-")


def test_environment_id_gpu_uses_device_name():
    env_id = environment_id(gpu())
    assert env_id.startswith("cuda-nvidia-h100-80gb-hbm3-torch2.14.1-t1-")
    assert ID_RE.match(env_id)


def test_environment_id_drops_local_version_of_torch():
    assert "-torch2.14.1-" in environment_id(exact(torch="2.14.1+cu128"))
    assert "-torch2.14.1-" in environment_id(exact(torch="2.14.1"))


def test_environment_id_threads():
    assert "-t4-" in environment_id(exact(threads=4))


def test_environment_id_is_a_safe_folder_name():
    for fields in (exact(), gpu(), exact(cpu_model="Weird/CPU\\name: with spaces & symbols!!")):
        env_id = environment_id(fields)
        assert "/" not in env_id and "\\" not in env_id and " " not in env_id
        assert re.fullmatch(r"[A-Za-z0-9._+-]+", env_id), env_id


def test_environment_id_hardware_slug_is_at_most_24_chars():
    env_id = environment_id(exact(cpu_model="A" * 100))
    slug = env_id[len("cpu-") : env_id.index("-torch")]
    assert slug == "a" * 24


def test_environment_id_unknown_hardware():
    assert environment_id(exact(cpu_model=None)).startswith("cpu-unknown-torch")
    assert environment_id(exact(cpu_model="")).startswith("cpu-unknown-torch")
    assert environment_id(exact(cpu_model="Intel CPU")).startswith("cpu-hw-torch")  # nothing left


def test_environment_id_minimal_mapping():
    env_id = environment_id({})
    assert env_id.startswith("cpu-unknown-torch-tNone-")


def test_environment_id_is_stable_and_order_independent():
    fields = exact()
    reordered = dict(reversed(list(fields.items())))
    assert environment_id(fields) == environment_id(reordered) == environment_id(exact())


@pytest.mark.parametrize("field", EXACT_FIELDS)
def test_environment_id_changes_with_every_exact_field(field):
    base = exact()
    changed = dict(base)
    changed[field] = "something-else"
    assert environment_id(changed) != environment_id(base)


def test_environment_id_digest_separates_same_readable_prefix():
    a = environment_id(exact(cpu_isa="avx2"))
    b = environment_id(exact(cpu_isa="avx2,avx512f"))
    assert a.rsplit("-", 1)[0] == b.rsplit("-", 1)[0]
    assert a != b


def test_environment_id_accepts_non_json_values():
    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert ID_RE.match(environment_id(exact(blas=Odd())))


def test_describe_difference_lists_fields_in_exact_order():
    here = exact(torch="2.14.1", threads=1)
    stored = exact(torch="2.13.0", threads=4)
    assert (
        describe_difference(here, stored)
        == "torch 2.14.1 here vs 2.13.0 stored; threads 1 here vs 4 stored"
    )


def test_describe_difference_order_follows_exact_fields_not_dict_order():
    here = exact(threads=1, device="cpu")
    stored = dict(reversed(list(exact(threads=2, device="cuda").items())))
    text = describe_difference(here, stored)
    assert text == "device cpu here vs cuda stored; threads 1 here vs 2 stored"


def test_describe_difference_missing_fields_count_as_none():
    text = describe_difference({"torch": "2.14.1"}, {})
    assert text == "torch 2.14.1 here vs None stored"
    assert describe_difference({}, {"threads": 2}) == "threads None here vs 2 stored"


def test_describe_difference_ignores_non_exact_fields():
    here = {**exact(), "hostname": "a", "python": "3.11"}
    stored = {**exact(), "hostname": "b", "python": "3.12"}
    assert describe_difference(here, stored).startswith("fingerprints match but ids differ")


def test_describe_difference_identical():
    assert describe_difference(exact(), exact()) == (
        "fingerprints match but ids differ (stored by another version?)"
    )
    assert describe_difference({}, {}).startswith("fingerprints match")


def test_describe_difference_gpu_vs_cpu():
    text = describe_difference(gpu(), exact())
    parts = text.split("; ")
    assert parts[0] == "device cuda here vs cpu stored"
    assert parts[1] == "device_name NVIDIA H100 80GB HBM3 here vs None stored"
    assert [p.split()[0] for p in parts] == [
        "device",
        "device_name",
        "device_memory_gib",
        "cuda",
        "cudnn",
    ]
