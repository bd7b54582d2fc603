"""What a measurement kind's report part gives (``REPORT`` in each ``kinds/<kind>/report.py``):
a :class:`KindReport`, with the :class:`Column` s it adds to a run's tables. The reports find
the kinds' parts through :mod:`pytest_torchperf.report.kinds`; this module only declares what a
part is, so a kind's part can import it without importing the lookup that loads the parts (an
import cycle). Pure; what a part reads and why: docs/architecture.md ("report part").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session


@dataclass(frozen=True)
class Column:
    """A column a kind adds to a run's tables (terminal, markdown, HTML, ``torchperf compare``),
    shown only when some record has a value there."""

    #: The HTML column's key (its cells and the ``data-col`` switch find it by this).
    key: str
    #: The header in the terminal and markdown tables and ``torchperf compare``'s.
    header: str
    #: The header in the HTML table (room for words the terminal has no width for).
    html_header: str
    #: Whether a record has a value in this column.
    shown: Callable[[Record], bool]
    #: The cell's text for a record (``-`` where it has none).
    cell: Callable[[Record], str]
    #: The HTML cell's sort value (a number, so the column sorts by magnitude, not text).
    sort_value: Callable[[Record], object]


@dataclass(frozen=True)
class KindReport:
    """A measurement kind's report part: what the reports show of its figures. Every field has
    the default of a kind that adds nothing, so a part gives only what its kind changes."""

    #: Whether a record carries this kind's figures; when any record of a table does, the table
    #: names its baseline and change columns with :attr:`headers` / :attr:`html_headers`.
    carried: Callable[[Record], bool] = lambda record: False
    #: Columns this kind adds to the run's tables, in order.
    columns: tuple[Column, ...] = ()
    #: The terminal and markdown tables' headers where this kind's figures are carried, by the
    #: column they rename (``baseline``, ``change``). Where the figures of several kinds are
    #: carried, the first kind in the registry's order that renames a column names it.
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The HTML table's headers, as :attr:`headers`.
    html_headers: Mapping[str, str] = field(default_factory=dict)
    #: How the baseline figure of a verdict judged on this kind's basis (``verdict.basis`` is the
    #: kind's name) reads; None: it is a time, as the shared tables word it.
    baseline: Callable[[float | None], str] | None = None
    #: What the change column adds after the verdict's change (an interval), or "".
    change: Callable[[Record], str] = lambda record: ""
    #: The sessions a record carries as its own baseline (measured in the same run), which
    #: ``torchperf compare`` replays it against instead of a baseline folder's; None: none.
    carried_sessions: Callable[[Record], list[Session] | None] = lambda record: None
    #: ``torchperf show``'s baseline and latest figures of an environment filed under this
    #: kind's name (:func:`pytest_torchperf.store.environment.environment_mode`), where they are
    #: not times: every session counts and no timing limit applies; with ``judged at``, the
    #: limit a compare holds the figure to. None: timed environment.
    stored_figures: Callable[[Sequence[Session]], dict[str, str]] | None = None
    #: What ``torchperf show`` adds to a timed environment's baseline from this kind's figures
    #: stored beside the timing, or "".
    stored_note: Callable[[Sequence[Session]], str] = lambda sessions: ""
    #: A record's figure in a series of runs (``torchperf history``) when it is this kind's rather
    #: than a time: the unit and the figure, or None.
    series_figure: Callable[[Record], tuple[str, float] | None] = lambda record: None
