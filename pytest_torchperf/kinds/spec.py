"""A measurement kind's declaration (:class:`KindSpec`): what each kind package's ``__init__``
holds, and what another plugin registers. Pure; imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The layers a kind's part may belong to (the module ``<package>.<layer>``).
PART_LAYERS = ("judge", "report", "run", "plugin")


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

    def __post_init__(self) -> None:
        unknown = sorted(set(self.parts) - set(PART_LAYERS))
        if unknown:
            raise ValueError(
                f"measurement kind {self.name!r} declares parts {unknown}: a kind's parts are "
                f"among {', '.join(PART_LAYERS)}"
            )
