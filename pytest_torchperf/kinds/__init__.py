"""The measurement kinds, one package each, and the one registry of them.

A measurement kind is what a measurement's performance figure is and how it is judged: ``time``
(timed blocks against stored sessions), ``instructions`` (instructions per call under Valgrind),
``ab`` (process pairs of two sides measured now), ``time-or-instructions`` (time, and the count
stored beside it where timing cannot decide) and ``time-and-kernels`` (time, and the GPU kernel
time beside it). Each lives in ``pytest_torchperf/kinds/<package>/``: its ``__init__`` declares
it (:class:`KindSpec`, pure); its modules are named for the layer they belong to
(``measure_callgrind``: measuring; ``judge``: judging; ``report``: what the reports show of its
figures; ``run``: keeping and when it is chosen; ``plugin``: its child-process schedule), so the
layers' import rules hold inside a kind too (``tests/unit/test_import_graph.py``).

The rest of the package never imports a kind's modules by name: each layer asks the registry for
the part of its own layer (:func:`part`: ``judge`` for
:func:`pytest_torchperf.judge.kinds.kind_of`, ``report`` for
:func:`pytest_torchperf.report.kinds.report_parts`, ``run`` for
:func:`pytest_torchperf.run.kinds.run_part`, ``plugin`` for the child-process schedules, and
as a pytest plugin of the run for its own hooks). Adding a kind is its package and one name in
:data:`PACKAGES`; another plugin adds one with the ``pytest_torchperf_kinds`` hook
(:func:`register`). Pure: importing this module imports the kinds' declarations only.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from pytest_torchperf.core.types import JSON
from pytest_torchperf.kinds.spec import KindSpec as KindSpec  # what another plugin registers

#: The built-in kinds' packages, in the order a measurement's kind is chosen: the first whose
#: ``run`` part says it is chosen (:func:`pytest_torchperf.run.kinds.run_part`) is the kind.
#: ``time`` is last: it is chosen when no other is.
PACKAGES = ("ab", "instructions", "fallback", "kernels", "time")

_added: list[KindSpec] = []
_BUILTIN: tuple[KindSpec, ...] = tuple(import_module(f"{__name__}.{p}").SPEC for p in PACKAGES)


def specs() -> tuple[KindSpec, ...]:
    """Every kind, in the order a measurement's kind is chosen: the ones other plugins added
    (before the built-in ones, so a plugin's kind can take a measurement ``time`` would), then
    the built-in ones."""
    return (*_added, *_BUILTIN)


def names() -> tuple[str, ...]:
    """The kinds' names, as a gate records them."""
    return tuple(spec.name for spec in specs())


def result_keys() -> tuple[str, ...]:
    """Every kind's :attr:`KindSpec.result_keys`, each once, in the registry's order."""
    return tuple(dict.fromkeys(k for spec in specs() for k in spec.result_keys))


def gate_keys() -> tuple[str, ...]:
    """Every kind's :attr:`KindSpec.gate_keys`, each once, sorted."""
    return tuple(sorted({k for spec in specs() for k in spec.gate_keys}))


def gate_facts() -> dict[str, JSON]:
    """Every kind's :attr:`KindSpec.gate_facts`: a gate's key, its value where a gate has none."""
    return {key: default for spec in specs() for key, default in spec.gate_facts}


def figure_names() -> dict[str, str]:
    """Every kind's :attr:`KindSpec.figures`: a gated figure's name, by its basis."""
    return {basis: name for spec in specs() for basis, name in spec.figures}


def declared(basis: object) -> KindSpec:
    """The kind a verdict's ``basis`` names, for the words it declares (:attr:`KindSpec.label`,
    ``removed``, ``against``); for a basis no kind here has (a record written before verdicts
    recorded their basis, or by a plugin's kind that is not installed), the declaration's
    defaults: ``time``, ``removed``, ``vs baseline``."""
    return next((spec for spec in specs() if spec.name == basis), _UNDECLARED)


#: What a basis no kind here has reads as: :class:`KindSpec`'s defaults.
_UNDECLARED = KindSpec(name="", package="", summary="")


def label_of(basis: object) -> str:
    """What the one label calls the figure of a verdict judged on ``basis``: ``time``,
    ``instructions`` (:func:`declared`)."""
    return declared(basis).label


def removed_label_of(basis: object) -> str:
    """What the one label calls a measurement only its baseline has, judged on ``basis``:
    ``removed in B`` (:func:`declared`)."""
    return declared(basis).removed


def against_of(basis: object) -> str:
    """What a change of a verdict judged on ``basis`` is against: ``in B vs side A``
    (:func:`declared`)."""
    return declared(basis).against


def spec_named(name: str) -> KindSpec:
    """The kind a gate names; an unknown name is a clear error (a results file written with a
    plugin's kind read where that plugin is not installed)."""
    found = next((spec for spec in specs() if spec.name == name), None)
    if found is not None:
        return found
    raise ValueError(
        f"unknown measurement kind {name!r} (known: {', '.join(names())}): the file was written "
        f"by a run with a plugin that added it; install that plugin to read it"
    )


def register(spec: KindSpec) -> None:
    """Add another plugin's kind (the ``pytest_torchperf_kinds`` hook); a name taken already is
    an error, registering the same spec twice is not."""
    if spec in _added:
        return
    if spec.name in names():
        raise ValueError(f"measurement kind {spec.name!r} is registered already")
    if "options" in spec.parts or spec.gate_keys:
        # The option table and the gates' limits are built when pytest-torchperf loads, before
        # any plugin registers a kind.
        raise ValueError(
            f"measurement kind {spec.name!r} declares an options part or gate keys, which only "
            f"the built-in kinds can: add its options with the plugin's own pytest_addoption"
        )
    _added.append(spec)


def forget_added() -> None:
    """Forget the kinds other plugins registered (a new pytest run in the same process, such as
    an in-process ``pytester`` run, registers its own)."""
    _added.clear()


def parts(layer: str, having: str | None = None) -> list[ModuleType]:
    """Every kind's module of ``layer``, in the registry's order: those that have one (and that
    define ``having``, when given: the plugin parts with run settings, say). Called only by the
    layer itself, as :func:`part` is."""
    found = (part(spec, layer) for spec in specs())
    return [m for m in found if m is not None and (having is None or hasattr(m, having))]


def part(spec: KindSpec, layer: str) -> ModuleType | None:
    """A kind's module of ``layer`` (``<package>.<layer>``), or None when it has none. Called
    only by the layer itself (the import-graph test treats the call as importing every kind's
    ``<layer>`` module)."""
    if layer not in spec.parts:
        return None
    return import_module(f"{spec.package}.{layer}")
