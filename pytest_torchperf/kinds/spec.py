"""A measurement kind's declaration (:class:`KindSpec`): what each kind package's ``__init__``
holds, and what another plugin registers. Pure; imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_torchperf.core.types import JSON

#: The layers a kind's part may belong to (the module ``<package>.<layer>``).
PART_LAYERS = ("options", "judge", "report", "run", "plugin")


@dataclass(frozen=True)
class KindSpec:
    """A measurement kind's declaration: its name and where its parts are."""

    #: The name recorded in a measurement's gate and results (``instructions``).
    name: str
    #: The package holding its parts (``pytest_torchperf.kinds.instructions``).
    package: str
    #: One line for ``--help`` texts and the docs: what its figure is.
    summary: str
    #: The layers it has a part in (a kind without child processes has no ``plugin`` part).
    parts: tuple[str, ...] = ("judge", "run")
    #: The keys of a measurement's record that hold its own data (``ab``: the process pairs),
    #: and those of the session a save would store (``kernels``): what the engine's candidate
    #: carries for it (:attr:`pytest_torchperf.judge.inputs.Candidate.sections`).
    record_keys: tuple[str, ...] = ()
    session_keys: tuple[str, ...] = ()
    #: The keys its data adds to a measurement's record once concluded (``instructions``,
    #: ``instructions_vs_eager``; ``ab``): every record has them, None where no kind set them
    #: (:attr:`pytest_torchperf.run.result.Result.sections`).
    result_keys: tuple[str, ...] = ()
    #: Its own options a measurement's gate records and the kind judges with
    #: (``max_instruction_increase``): :meth:`pytest_torchperf.judge.inputs.Gate.limit`.
    gate_keys: tuple[str, ...] = ()
    #: What it records in a measurement's gate besides its limits, each with its value where a
    #: gate has none (``("ab", "")``: side A of an A/B run, empty in any other run):
    #: :meth:`pytest_torchperf.judge.inputs.Gate.fact`.
    gate_facts: tuple[tuple[str, JSON], ...] = ()
    #: How a run's summary names the figures it gates, by the verdict basis (or extra gate)
    #: that judged them (``{"ab": "A/B pairs"}``): "timing judged for 3 of 4 (3 on A/B pairs)".
    figures: tuple[tuple[str, str], ...] = ()
    #: What the one label of a measurement's outcome calls the figure of a verdict whose basis
    #: is this kind's name (``FAIL (instructions)``, ``FAIL (time, counters)``, ``instructions
    #: inconclusive``): ``time`` for every kind whose verdict times.
    label: str = "time"
    #: What the one label, and a run's count of outcomes, call a measurement only its baseline
    #: has (outcome ``removed``) where a verdict's basis is this kind's name: ``removed in B``,
    #: side A's measurement of an A/B run that the working tree no longer has.
    removed: str = "removed"
    #: What a change of a verdict whose basis is this kind's name is against, as messages say
    #: it (``counters changed in B vs side A``): ``vs baseline`` for a kind that keeps one.
    against: str = "vs baseline"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.parts) - set(PART_LAYERS))
        if unknown:
            raise ValueError(
                f"measurement kind {self.name!r} declares parts {unknown}: a kind's parts are "
                f"among {', '.join(PART_LAYERS)}"
            )
