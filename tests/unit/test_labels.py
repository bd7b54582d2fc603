"""The one outcome label (judge.labels.outcome_label) shared by every report and the CLI."""

from __future__ import annotations

import pytest

from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.store.record import Record


@pytest.mark.parametrize(
    ("record", "label"),
    [
        ({"outcome": "pass", "verdict": {"outcome": "pass"}}, "pass"),
        ({"outcome": "fail", "verdict": {"outcome": "fail"}}, "FAIL"),
        (
            {"outcome": "fail", "verdict": {"outcome": "pass"}, "counter_changes": ["ops"]},
            "FAIL (counters)",
        ),
        (
            {"outcome": "fail", "verdict": {"outcome": "fail"}, "counter_changes": ["ops"]},
            "FAIL (time, counters)",
        ),
        (
            {"outcome": "fail", "verdict": {"outcome": "inconclusive"}, "counter_changes": ["x"]},
            "FAIL (counters), time inconclusive",
        ),
        (
            {
                "outcome": "fail",
                "verdict": {"outcome": "pass"},
                "failures": ["a: outputs drifted ...", "a: speedup ..."],
                "failure_kinds": ["speedup", "accuracy"],
            },
            "FAIL (accuracy, speedup)",
        ),
        (
            # The label comes from the kind, never the words: a metric failure that mentions
            # a speedup is labelled metric.
            {
                "outcome": "fail",
                "verdict": {"outcome": "fail"},
                "failures": ["a: metric changed (its speedup ...)"],
                "failure_kinds": ["metric"],
            },
            "FAIL (time, metric)",
        ),
        (
            # Seen on a GRU: its counters and its outputs failed while timing was inconclusive;
            # the label named the counters alone.
            {
                "outcome": "fail",
                "verdict": {"outcome": "inconclusive"},
                "counter_changes": ["ops"],
                "failures": ["gru: outputs moved by 4.30e-02 ..."],
                "failure_kinds": ["numerics"],
            },
            "FAIL (counters, numerics), time inconclusive",
        ),
        (
            {
                "outcome": "fail",
                "verdict": {"outcome": "fail"},
                "counter_changes": ["ops"],
                "failures": ["a: metric ...", "a: outputs ...", "a: metric again ..."],
                "failure_kinds": ["metric", "numerics", "metric"],
            },
            "FAIL (time, counters, numerics, metric)",
        ),
        (
            # Any failure beside an inconclusive timing says so, not only a counter change.
            {
                "outcome": "fail",
                "verdict": {"outcome": "inconclusive"},
                "failures": ["a: strict ..."],
                "failure_kinds": ["strict"],
            },
            "FAIL (strict), time inconclusive",
        ),
        (
            # A results file written before kinds were recorded: the bare label.
            {"outcome": "fail", "verdict": {"outcome": "pass"}, "failures": ["a drifted: ..."]},
            "FAIL",
        ),
        (
            {"outcome": "pass", "verdict": {"outcome": "pass", "suspicious": True}},
            "pass (re-measured)",
        ),
        ({"outcome": "measured", "saved": True}, "measured, saved"),
        (
            {"outcome": "measured", "not_saved": "machine +32.9% slower"},
            "measured, not saved: machine +32.9% slower",
        ),
        (
            # --torchperf-processes: the other processes' sessions were stored, this one's not.
            {
                "outcome": "measured",
                "saved": True,
                "not_saved": "this process's session (machine +32.9% slower)",
            },
            "measured, saved but not this process's session (machine +32.9% slower)",
        ),
    ],
)
def test_outcome_label(record: dict, label: str) -> None:
    assert outcome_label(Record.from_json(record)) == label


def test_a_failure_keeps_its_kind_through_a_record_and_a_pickle() -> None:
    import pickle

    from pytest_torchperf.judge.failures import Failure, categories_of, label_categories, restore

    failures = [Failure("numerics", "m: numerics changed ..."), "an old plain sentence"]
    assert categories_of(failures) == ["numerics", None]
    restored = restore([str(f) for f in failures], categories_of(failures))
    assert categories_of(restored) == ["numerics", None] and restored == failures
    assert pickle.loads(pickle.dumps(failures[0])).category == "numerics"
    assert label_categories(["variant", "strict", None, "strict"]) == ["strict", "variant"]
    assert label_categories([None]) == []
    with pytest.raises(ValueError, match="unknown failure category 'slow'"):
        Failure("slow", "m: ...")


def test_a_verdict_against_a_noisy_baseline_says_so_in_its_label() -> None:
    noisy = {
        "outcome": "inconclusive",
        "verdict": {"outcome": "inconclusive", "guard": "noisy baseline"},
    }
    assert outcome_label(Record.from_json(noisy)) == "INCONCLUSIVE (noisy baseline)"
    strict = {**noisy, "outcome": "fail", "failures": ["m: ..."], "failure_kinds": ["strict"]}
    assert (
        outcome_label(Record.from_json(strict))
        == "FAIL (strict), time inconclusive (noisy baseline)"
    )
    busy = {"outcome": "inconclusive", "verdict": {"outcome": "inconclusive", "guard": "spread"}}
    assert outcome_label(Record.from_json(busy)) == "INCONCLUSIVE"


def test_the_label_names_the_figure_the_verdicts_kind_names() -> None:
    """The word for a verdict's figure comes from the kind its basis names (``KindSpec.label``):
    a built-in count, an A/B or timed verdict, and a kind another plugin added."""
    from pytest_torchperf.kinds import KindSpec, forget_added, register

    def label(basis: str | None, outcome: str = "fail") -> str:
        verdict = {"outcome": outcome, **({"basis": basis} if basis else {})}
        record = {"outcome": "fail", "verdict": verdict, "counter_changes": ["x"]}
        return outcome_label(Record.from_json(record))

    assert label("instructions") == "FAIL (instructions, counters)"
    assert label("instructions", "inconclusive") == "FAIL (counters), instructions inconclusive"
    assert label("ab") == label("time") == label(None) == "FAIL (time, counters)"
    assert label("energy") == "FAIL (time, counters)"  # a kind not installed here
    register(KindSpec("energy", "other_kind", "joules", label="energy"))
    try:
        assert label("energy") == "FAIL (energy, counters)"
        assert label("energy", "inconclusive") == "FAIL (counters), energy inconclusive"
    finally:
        forget_added()


def test_the_docs_list_the_labels_the_code_prints() -> None:
    """docs/fixtures-and-api.md listed `, saved` and `, not saved: <why>` while a save in several
    processes printed `measured, saved but not this process's session (...)`."""
    from pathlib import Path

    from pytest_torchperf.judge.failures import CATEGORIES

    doc = Path(__file__).resolve().parents[2] / "docs" / "fixtures-and-api.md"
    text = " ".join(doc.read_text(encoding="utf-8").split())
    records = [
        *(
            {"outcome": "measured", **save}
            for save in (
                {"saved": True},
                {"saved": True, "untimed": "<why>"},
                {"saved": True, "not_saved": "this process's session (<why>)"},
                {"not_saved": "<why>"},
            )
        ),
        {
            "outcome": "inconclusive",
            "verdict": {"outcome": "inconclusive", "guard": "noisy baseline"},
        },
        {"outcome": "new", "verdict": {"outcome": "new", "untimed": True}},
    ]
    labels = [outcome_label(Record.from_json(r)).removeprefix("measured") for r in records]
    for label in [*labels, *(f"FAIL ({category})" for category in CATEGORIES)]:
        assert f"`{label}`" in text, label
