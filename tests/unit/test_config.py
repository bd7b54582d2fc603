"""Unit tests of pytest_torchperf.options.measure_options: value parsers, keyword checks and layer precedence."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest

from pytest_torchperf.options.measure_options import (
    ADVISED_MIN_TIME,
    OPTIONS,
    SECTIONS,
    VALID_KEYWORDS,
    MeasureOptions,
    OptionError,
    check_keywords,
    parse_layer,
    resolve,
    short_min_time,
)
from pytest_torchperf.options.values import (
    DEVICE_CHOICES,
    parse_bool,
    parse_device,
    parse_duration,
    parse_fraction,
    parse_label,
    parse_positive_int,
)

# --------------------------------------------------------------------------------------------------
# parse_device
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("auto", "auto"),
        (" CUDA ", "cuda"),
        ("cuda:1", "cuda:1"),
        ("mps", "mps"),
        ("xpu:0", "xpu:0"),
        # Another backend's name, registered with torch by its own package (Cambricon, Moore
        # Threads): left to the test that asks for it, as a name torch has but cannot time.
        ("mlu:0", "mlu:0"),
        ("musa", "musa"),
        ("meta", "meta"),
    ],
)
def test_parse_device_accepts_torch_device_names(value: str, expected: str) -> None:
    assert parse_device(value) == expected


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("cdua", " (did you mean 'cuda'?)"),
        ("cdua:1", " (did you mean 'cuda:1'?)"),
        ("gpu", " (did you mean 'cuda'?)"),
        ("cuda:-1", " (did you mean 'cuda'?)"),
        ("cpuu", " (did you mean 'cpu'?)"),
        ("cuda 0", " (did you mean 'cuda'?)"),
        ("9x", ""),
    ],
)
def test_parse_device_refuses_other_names_with_the_accepted_ones(value: str, hint: str) -> None:
    """Checked without torch: a misspelt device is refused when pytest starts, not when the
    torchperf_device fixture first asks torch (a raw traceback, and tests without the fixture
    passing on CPU)."""
    with pytest.raises(OptionError) as info:
        parse_device(value)
    assert str(info.value) == f"{value!r} is not a device{hint}: use {DEVICE_CHOICES}"
    assert DEVICE_CHOICES.startswith("auto (an accelerator if present, else cpu), cpu, cuda, ")


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("tpu", "'tpu' is not a torch device type: torch calls a TPU 'xla' (torch_xla), and "),
        ("TPU:1", "'TPU:1' is not a torch device type: torch calls a TPU 'xla' (torch_xla), and "),
        ("xla", "'xla' (a TPU or another device of torch_xla): "),
        ("xla:0", "'xla:0' (a TPU or another device of torch_xla): "),
    ],
)
def test_parse_device_refuses_a_tpu_saying_why_and_what_to_use(value: str, named: str) -> None:
    """A TPU was accepted as another backend's name and its torchperf_device tests skipped,
    saying only that torch did not know the type; torch calls it xla, which the timer cannot
    time on any machine (lazy tensors), so it is refused when pytest starts."""
    with pytest.raises(OptionError) as info:
        parse_device(value)
    assert str(info.value) == (
        f"{named}pytest-torchperf cannot time an XLA device: its tensors compute lazily, when "
        f"torch_xla syncs them, which the timer does not do, so a block would time the tracing. "
        f"Use {DEVICE_CHOICES}"
    )


# --------------------------------------------------------------------------------------------------
# parse_fraction
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10%", 0.10),
        (" 10 % ", 0.10),
        ("0.1", 0.10),
        (0.1, 0.10),
        ("150%", 1.50),
        ("2.5%", 0.025),
        ("1e-1", 0.10),
        (0.999, 0.999),
        ("100%", 1.0),
    ],
)
def test_parse_fraction_accepts(value, expected):
    assert parse_fraction(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("10", "ambiguous"),
        (10, "ambiguous"),
        (1, "ambiguous"),
        ("1.0", "ambiguous"),
        ("abc", "not a percentage or fraction"),
        ("", "not a percentage or fraction"),
        ("%", "not a percentage or fraction"),
        ("ten%", "not a percentage or fraction"),
        ("-5%", "must be a positive"),
        ("-0.1", "must be a positive"),
        (0, "must be a positive"),
        ("0%", "must be a positive"),
        (True, "not a percentage or fraction"),
        (False, "not a percentage or fraction"),
        ("nan", "must be a positive"),
        ("nan%", "must be a positive"),
        (None, "not a percentage or fraction"),
    ],
)
def test_parse_fraction_rejects(value, match):
    with pytest.raises(OptionError, match=match) as info:
        parse_fraction(value)
    assert repr(value) in str(info.value)  # the message quotes the value


def test_parse_fraction_ambiguous_suggests_percent_form():
    with pytest.raises(OptionError) as info:
        parse_fraction("10")
    assert "'10%'" in str(info.value)
    assert "0.1" in str(info.value)


def test_option_error_is_value_error():
    assert issubclass(OptionError, ValueError)


# --------------------------------------------------------------------------------------------------
# parse_duration
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1s", 1.0),
        ("500ms", 0.5),
        ("250us", 250e-6),
        ("0.5", 0.5),
        (" 2 s ", 2.0),
        ("1.5ms", 1.5e-3),
        (".5s", 0.5),
        ("1e-3", 1e-3),
        ("2e2ms", 0.2),
        (2, 2.0),
        (0.25, 0.25),
    ],
)
def test_parse_duration_accepts(value, expected):
    result = parse_duration(value)
    assert isinstance(result, float)
    assert result == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("abc", "not a duration"),
        ("1min", "not a duration"),
        ("1 h", "not a duration"),
        ("-1s", "not a duration"),
        ("", "not a duration"),
        ("s", "not a duration"),
        (True, "not a duration"),
        (False, "not a duration"),
        (None, "not a duration"),
        ("0", "must be a positive duration"),
        ("0ms", "must be a positive duration"),
        (0, "must be a positive duration"),
        (-1.0, "must be a positive duration"),
        (math.inf, "must be a positive duration"),
        (math.nan, "must be a positive duration"),
    ],
)
def test_parse_duration_rejects(value, match):
    with pytest.raises(OptionError, match=match) as info:
        parse_duration(value)
    assert repr(value) in str(info.value)


# --------------------------------------------------------------------------------------------------
# parse_positive_int, parse_bool, parse_label
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("1", 1), (4, 4), (" 8 ", 8), ("16", 16)])
def test_parse_positive_int_accepts(value, expected):
    assert parse_positive_int(value) == expected


@pytest.mark.parametrize("value", ["0", 0, -1, "-3", "1.5", 2.5, "abc", "", True, False, None])
def test_parse_positive_int_rejects(value):
    with pytest.raises(OptionError, match="positive integer") as info:
        parse_positive_int(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("True", True),
        (" TRUE ", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        (1, True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("off", False),
        (0, False),
    ],
)
def test_parse_bool_accepts(value, expected):
    assert parse_bool(value) is expected


@pytest.mark.parametrize("value", ["maybe", "", "2", 2, "y", None])
def test_parse_bool_rejects(value):
    with pytest.raises(OptionError, match="not a boolean") as info:
        parse_bool(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"), [("resnet", "resnet"), ("  fast path ", "fast path")]
)
def test_parse_label_accepts(value, expected):
    assert parse_label(value) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("", "non-empty"),
        ("   ", "non-empty"),
        (None, "non-empty"),
        (3, "non-empty"),
        ("a/b", "must not contain"),
        ("a\\b", "must not contain"),
        ("a\nb", "must not contain"),
        ("a\rb", "must not contain"),
    ],
)
def test_parse_label_rejects(value, match):
    with pytest.raises(OptionError, match=match) as info:
        parse_label(value)
    assert repr(value) in str(info.value)


# --------------------------------------------------------------------------------------------------
# parse_share (guard thresholds; present once the contention guard became configurable)
# --------------------------------------------------------------------------------------------------

_config_module = pytest.importorskip("pytest_torchperf.options.measure_options")
needs_share = pytest.mark.skipif(
    not hasattr(_config_module, "parse_share"), reason="config.parse_share not present"
)


@needs_share
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.9, 0.9),
        ("0.9", 0.9),
        ("90%", 0.9),
        (" 50 % ", 0.5),
        (0, 0.0),
        ("0", 0.0),
        (1, 1.0),
        ("100%", 1.0),
    ],
)
def test_parse_share_accepts(value, expected):
    assert _config_module.parse_share(value) == pytest.approx(expected)


@needs_share
@pytest.mark.parametrize(
    "value", [1.5, "150%", -0.1, "-5%", "abc", "", True, False, None, "nan", float("nan")]
)
def test_parse_share_rejects(value):
    with pytest.raises(OptionError, match="share between 0 and 1") as info:
        _config_module.parse_share(value)
    assert repr(value) in str(info.value)


# --------------------------------------------------------------------------------------------------
# The option table and keyword checks
# --------------------------------------------------------------------------------------------------


def test_every_option_field_has_a_spec():
    shared = {f.name for f in fields(MeasureOptions)} - {"sections"}
    assert shared | {f.name for t in SECTIONS for f in fields(t)} == set(OPTIONS)
    assert set(VALID_KEYWORDS) == set(OPTIONS) | {"name"}
    assert list(VALID_KEYWORDS) == sorted(VALID_KEYWORDS)


def test_cli_settable_options():
    cli = {n for n, spec in OPTIONS.items() if spec.cli}
    assert {"max_slowdown", "min_time", "warmup", "threads", "strict"} <= cli
    assert not cli & {"inference", "check_finite", "group"}


def test_every_spec_has_help():
    for name, spec in OPTIONS.items():
        assert spec.name == name
        assert spec.help.strip()


def test_defaults():
    opts = MeasureOptions()
    assert opts.max_slowdown == 0.10
    assert opts.min_time == 1.0
    assert opts.warmup == 0.2
    assert opts.threads == 1
    assert opts.strict is False
    assert opts.inference is True
    assert opts.check_finite is True
    assert opts.group is None
    if "min_cpu_share" in OPTIONS:
        assert opts.min_cpu_share == 0.9
    if "max_spread" in OPTIONS:
        assert opts.max_spread == 0.25


def test_check_keywords_accepts_valid():
    check_keywords({k: None for k in VALID_KEYWORDS}, "marker")
    check_keywords({}, "marker")


def test_check_keywords_unknown_names_where_suggests_and_lists():
    with pytest.raises(OptionError) as info:
        check_keywords({"max_slowdwn": "10%"}, "@pytest.mark.torchperf on tests/test_a.py::test_x")
    msg = str(info.value)
    assert msg.startswith("@pytest.mark.torchperf on tests/test_a.py::test_x: ")
    assert "unknown torchperf option 'max_slowdwn'" in msg
    assert "Did you mean 'max_slowdown'?" in msg
    assert "Valid options: " + ", ".join(VALID_KEYWORDS) + "." in msg
    for key in VALID_KEYWORDS:
        assert key in msg


def test_check_keywords_unknown_without_close_match_has_no_hint():
    with pytest.raises(OptionError) as info:
        check_keywords({"zzzzzz": 1}, "torchperf() call")
    msg = str(info.value)
    assert msg.startswith("torchperf() call: unknown torchperf option 'zzzzzz'.")
    assert "Did you mean" not in msg
    assert "Valid options:" in msg


def test_check_keywords_says_where_a_device_comes_from() -> None:
    """``device=`` is no option: the error says what decides a measurement's device."""
    with pytest.raises(OptionError) as info:
        check_keywords({"device": "tpu"}, "@pytest.mark.torchperf on t.py::t")
    assert str(info.value).startswith(
        "@pytest.mark.torchperf on t.py::t: unknown torchperf option 'device'. A measurement "
        "runs on the device its model and inputs are on: move them there "
        "(model.to(torchperf_device), the device --torchperf-device names). Valid options: "
    )


def test_check_keywords_leaves_out_what_the_layer_may_not_set():
    """A call may not set seed=: its unknown-keyword error neither lists nor suggests it (the
    list offered seed, and a call with seed=3 was then refused)."""
    valid = ", ".join(k for k in VALID_KEYWORDS if k != "seed")
    with pytest.raises(OptionError) as info:
        check_keywords({"sed": 3}, "t.py::t: torchperf(...) call", refused=("seed",))
    assert str(info.value) == (
        f"t.py::t: torchperf(...) call: unknown torchperf option 'sed'. Valid options: {valid}."
    )
    with pytest.raises(OptionError) as info:
        check_keywords({"seed": 3}, "t.py::t: torchperf(...) call", refused=("seed",))
    assert str(info.value) == (
        f"t.py::t: torchperf(...) call: seed= cannot be set there. Valid options: {valid}."
    )


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("thread", "threads"), ("warm_up", "warmup"), ("min_tim", "min_time"), ("stric", "strict")],
)
def test_check_keywords_suggestions(typo, suggestion):
    with pytest.raises(OptionError, match=f"Did you mean '{suggestion}'"):
        check_keywords({typo: 1}, "marker")


# --------------------------------------------------------------------------------------------------
# parse_layer
# --------------------------------------------------------------------------------------------------


def test_parse_layer_parses_every_option():
    parsed = parse_layer(
        {
            "max_slowdown": "20%",
            "min_time": "500ms",
            "warmup": "0.1",
            "threads": "2",
            "strict": "true",
            "inference": "no",
            "check_finite": 0,
            "group": " g ",
            "name": " fwd ",
        },
        "ini",
    )
    assert parsed == {
        "max_slowdown": pytest.approx(0.2),
        "min_time": 0.5,
        "warmup": 0.1,
        "threads": 2,
        "strict": True,
        "inference": False,
        "check_finite": False,
        "group": "g",
        "name": "fwd",
    }


def test_parse_layer_none_means_not_set():
    assert parse_layer({"max_slowdown": None, "threads": None, "strict": None}, "cli") == {}


def test_parse_layer_name_none_is_kept():
    assert parse_layer({"name": None}, "call") == {"name": None}


def test_parse_layer_bad_value_names_where_and_key():
    with pytest.raises(OptionError) as info:
        parse_layer({"max_slowdown": "10"}, "marker on t.py::x")
    msg = str(info.value)
    assert msg.startswith("marker on t.py::x: invalid value for max_slowdown: ")
    assert "'10' is ambiguous" in msg


def test_parse_layer_bad_name():
    with pytest.raises(OptionError, match="call: invalid value for name: 'a/b' must not contain"):
        parse_layer({"name": "a/b"}, "call")


def test_parse_layer_unknown_keyword():
    with pytest.raises(OptionError, match="ini: unknown torchperf option 'bogus'"):
        parse_layer({"bogus": 1}, "ini")


# --------------------------------------------------------------------------------------------------
# resolve: call > marker > cli > ini > default
# --------------------------------------------------------------------------------------------------

LAYERS = ("call", "marker", "cli", "ini")  # highest precedence first

#: Per option: distinct raw values, one per layer (call, marker, cli, ini), and their parsed values.
VALUES = {
    "max_slowdown": (["1%", "2%", "3%", "4%"], [0.01, 0.02, 0.03, 0.04]),
    "min_time": (["1ms", "2ms", "3ms", "4ms"], [1e-3, 2e-3, 3e-3, 4e-3]),
    "warmup": (["0.01", "0.02", "0.03", "0.04"], [0.01, 0.02, 0.03, 0.04]),
    "threads": (["2", "3", "4", "5"], [2, 3, 4, 5]),
    "group": (["a", "b", "c", "d"], ["a", "b", "c", "d"]),
}
if "min_cpu_share" in OPTIONS:
    VALUES["min_cpu_share"] = (["0.5", "60%", 0.7, "0.8"], [0.5, 0.6, 0.7, 0.8])
if "max_spread" in OPTIONS:
    VALUES["max_spread"] = (["5%", "0.06", 0.07, "8%"], [0.05, 0.06, 0.07, 0.08])


def _resolve(raw_layers):
    return resolve(
        *(parse_layer(raw, where) for raw, where in zip(raw_layers, LAYERS, strict=False))
    )


@pytest.mark.parametrize("option", sorted(VALUES))
@pytest.mark.parametrize("level", range(len(LAYERS)), ids=LAYERS)
def test_layer_wins_over_lower_and_loses_to_higher(level, option):
    raws, parsed = VALUES[option]
    # Set at this layer and every lower one: this layer wins.
    layers = [{} for _ in LAYERS]
    for i in range(level, len(LAYERS)):
        layers[i] = {option: raws[i]}
    assert getattr(_resolve(layers), option) == pytest.approx(parsed[level])
    # A higher layer set as well: that one wins instead.
    for higher in range(level):
        layers_h = [dict(layer) for layer in layers]
        layers_h[higher] = {option: raws[higher]}
        assert getattr(_resolve(layers_h), option) == pytest.approx(parsed[higher])
    # Alone at this layer: beats the default.
    alone = [{} for _ in LAYERS]
    alone[level] = {option: raws[level]}
    assert getattr(_resolve(alone), option) == pytest.approx(parsed[level])
    assert getattr(MeasureOptions(), option) != parsed[level]


def test_call_layer_beats_all():
    opts = _resolve(
        [
            {"max_slowdown": "50%"},
            {"max_slowdown": "40%"},
            {"max_slowdown": "30%"},
            {"max_slowdown": "20%"},
        ]
    )
    assert opts.max_slowdown == pytest.approx(0.5)


def test_marker_layer_beats_cli_ini_and_default_but_not_call():
    layers = [{}, {"threads": 3}, {"threads": "4"}, {"threads": "5"}]
    assert _resolve(layers).threads == 3
    layers[0] = {"threads": 2}
    assert _resolve(layers).threads == 2


def test_cli_layer_beats_ini_and_default_but_not_marker():
    layers = [{}, {}, {"min_time": "250ms"}, {"min_time": "2s"}]
    assert _resolve(layers).min_time == pytest.approx(0.25)
    layers[1] = {"min_time": "3s"}
    assert _resolve(layers).min_time == pytest.approx(3.0)


def test_ini_layer_beats_default_but_not_cli():
    layers = [{}, {}, {}, {"warmup": "0.5"}]
    assert _resolve(layers).warmup == pytest.approx(0.5)
    layers[2] = {"warmup": "0.05"}
    assert _resolve(layers).warmup == pytest.approx(0.05)


def test_default_when_no_layer_sets_anything():
    assert resolve() == MeasureOptions()
    assert _resolve([{}, {}, {}, {}]) == MeasureOptions()


def test_none_values_fall_through_to_lower_layers():
    # None in a higher layer (parsed or raw) means "not set here".
    assert _resolve(
        [{"max_slowdown": None}, {"max_slowdown": None}, {}, {"max_slowdown": "20%"}]
    ).max_slowdown == pytest.approx(0.2)
    assert resolve({"threads": None}, {"threads": 4}).threads == 4
    assert resolve({"group": None}, {}).group is None


def test_false_is_a_value_not_a_fall_through():
    # strict=False at the call beats strict=True on the command line.
    opts = _resolve([{"strict": False}, {}, {"strict": True}, {"strict": "true"}])
    assert opts.strict is False
    opts = _resolve([{}, {"inference": False}, {}, {}])
    assert opts.inference is False


def test_resolve_ignores_name_and_keeps_other_fields_default():
    opts = resolve({"name": "fwd", "threads": 2})
    assert opts.threads == 2
    assert opts.max_slowdown == MeasureOptions().max_slowdown
    assert not hasattr(opts, "name")


def test_resolve_merges_different_options_from_different_layers():
    opts = _resolve(
        [{"threads": 2}, {"max_slowdown": "25%"}, {"min_time": "0.5"}, {"strict": "yes"}]
    )
    assert opts == MeasureOptions(threads=2, max_slowdown=0.25, min_time=0.5, strict=True)


def test_a_min_time_below_the_advised_figure_gets_a_warning_naming_it() -> None:
    # docs/faq.md: "keep `min_time` at 0.5 s or more" on a noisy runner.
    assert ADVISED_MIN_TIME == 0.5
    faq = Path(__file__).resolve().parents[2] / "docs" / "faq.md"
    assert "keep `min_time` at 0.5 s or more" in " ".join(faq.read_text(encoding="utf-8").split())
    assert short_min_time(0.5, "--torchperf-min-time") is None
    assert short_min_time(1.0, "--torchperf-min-time") is None
    warning = short_min_time(0.005, "--torchperf-min-time")
    # What, the figure, the remedy: one short sentence each (it was ~450 characters).
    assert warning == (
        "min_time 5 ms (--torchperf-min-time) is below the 0.5 s docs/faq.md advises: fewer "
        "~10 ms blocks, noisier verdicts. Set 0.5 s or more, or filterwarnings = "
        "ignore:min_time where short timings are meant"
    )


def test_a_misspelt_counter_name_is_told_the_one_meant() -> None:
    from pytest_torchperf.options.values import parse_counter_names

    assert parse_counter_names(["ops", "memory"]) == ("memory", "ops")
    with pytest.raises(OptionError) as refused:
        parse_counter_names(["op"])
    assert str(refused.value) == (
        "unknown counter 'op' (did you mean 'ops'?); counters are flops, ops, params, memory, "
        "graphs"
    )
    with pytest.raises(OptionError, match=r"^unknown counter 'xyz'; counters are flops"):
        parse_counter_names("xyz")
