"""Reading what callgrind wrote: a profile's instruction total, ``callgrind_annotate``'s table of
self counts per function, and readable names for its C++ symbols. Pure text, no Valgrind needed
(:mod:`pytest_torchperf.kinds.instructions.measure_callgrind` runs the tools and counts)."""

from __future__ import annotations

import re
from pathlib import Path

#: The name all code without a symbol (JIT-generated kernels, at addresses that differ between
#: processes) is counted under.
JIT_CODE = "[JIT-generated code]"


class CallgrindError(RuntimeError):
    """Counting failed (tool missing, no profile written); the message says what to do."""


def file_total(profile: str) -> int:
    """Instructions (Ir) of one callgrind profile part, from its ``totals:`` line.

    Not its ``summary:`` line, nor ``callgrind_annotate``'s PROGRAM TOTALS (which prints the
    summary): after instrumentation was switched off and on again in the process, the summary of
    the next part came out near 2**64 (wrapped below zero) while ``totals:`` held the part's own
    cost (seen with Valgrind 3.19: parts 3 and 5 of six)."""
    events = ["Ir"]
    for line in profile.splitlines():
        if line.startswith("events:"):
            events = line.split(":", 1)[1].split()
        elif line.startswith("totals:"):
            values = line.split(":", 1)[1].split()
            index = events.index("Ir") if "Ir" in events else 0
            return int(values[index]) if index < len(values) else 0
    raise CallgrindError("the callgrind profile has no totals: line (was it cut short?)")


#: Bytes read from each end of a profile for its total: its ``events:`` line opens it, its
#: ``totals:`` line closes it.
_END_BYTES = 16_384


def profile_total(path: Path) -> int:
    """:func:`file_total` of the profile at ``path``, reading only its two ends: a window's
    total is read between windows, under Valgrind's instrumentation (some 100x slower than
    native), and a profile of torch code holds tens of thousands of functions."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size <= 2 * _END_BYTES:
            handle.seek(0)
            text = handle.read()
        else:
            handle.seek(0)
            head = handle.read(_END_BYTES)
            handle.seek(size - _END_BYTES)
            # The head's last line and the tail's first may be cut: a line break keeps them
            # apart.
            text = head + b"\n" + handle.read()
    return file_total(text.decode(errors="replace"))


#: One count column of ``callgrind_annotate``: ``21,172``, ``(16.72%)`` or ``.`` (zero).
_COUNT = re.compile(r"^(?:[\d,]+|\.|\(\s*[\d.]+%\))$")


def parse_annotate(text: str) -> tuple[int, dict[str, int]]:
    """The total instructions (Ir) and the self Ir per function (short names, overloads summed)
    of ``callgrind_annotate --inclusive=no`` output, with one event column or several
    (``--cache-sim=yes`` adds cache events; Ir is found by the ``Events shown:`` line)."""
    total = None
    functions: dict[str, int] = {}
    in_table = False
    ir_column = 0
    for line in text.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            ir_column = events.index("Ir") if "Ir" in events else 0
            continue
        if line.strip().endswith("file:function"):
            in_table = True
            continue
        parsed = _counts_and_name(line)
        if parsed is None:
            continue
        counts, what = parsed
        if len(counts) <= ir_column:
            continue
        if what == "PROGRAM TOTALS":
            total = counts[ir_column]
        elif in_table:
            name = short_name(what)
            functions[name] = functions.get(name, 0) + counts[ir_column]
    if total is None:
        raise CallgrindError("callgrind_annotate printed no PROGRAM TOTALS line")
    return total, functions


def _counts_and_name(line: str) -> tuple[list[int], str] | None:
    """``68,919 (100.0%) 21,357 (100.0%)  PROGRAM TOTALS`` -> ([68919, 21357], "PROGRAM TOTALS")."""
    line = re.sub(r"\(\s+", "(", line)  # "( 8.89%)" is one column
    tokens = line.split()
    counts: list[int] = []
    index = 0
    while index < len(tokens) and _COUNT.match(tokens[index]):
        token = tokens[index]
        if token == ".":
            counts.append(0)
        elif not token.startswith("("):
            counts.append(int(token.replace(",", "")))
        index += 1
    if not counts or index == len(tokens):
        return None
    # The name keeps its own spacing (C++ signatures contain spaces).
    rest = line.split(None, index)[index] if index else line
    return counts, rest.strip()


#: Parameter lists, template arguments and return types that make C++ symbols unreadable.
_TEMPLATE = re.compile(r"<[^<>]*>")


def short_name(symbol: str) -> str:
    """A readable function name from a callgrind symbol.

    ``/usr/lib/libtorch_cpu.so:at::native::(anonymous namespace)::gemm_impl<float>(char, long)
    [/usr/lib/libtorch_cpu.so]`` -> ``at::native::(anonymous namespace)::gemm_impl``;
    ``???:_PyEval_EvalFrameDefault`` -> ``_PyEval_EvalFrameDefault``.
    """
    name = symbol.strip()
    name = re.sub(r"\s+\[[^\]]*\]$", "", name)  # trailing "[object file]"
    if ":" in name and not name.split(":", 1)[1].startswith(":"):
        head, rest = name.split(":", 1)
        if "/" in head or head == "???" or head.endswith((".c", ".cpp", ".h", ".so")):
            name = rest  # "file:function"
    previous = None
    while previous != name:  # nested templates, innermost first
        previous, name = name, _TEMPLATE.sub("", name)
    paren = name.find("(", 1 if name.startswith("(") else 0)
    while paren != -1 and name[paren:].startswith("(anonymous namespace)"):
        paren = name.find("(", paren + len("(anonymous namespace)"))
    if paren > 0:
        name = name[:paren]
    name = re.sub(r"'\d+$", "", name.strip())  # callgrind's recursion depth: "f'2"
    if re.fullmatch(r"0x[0-9a-fA-F]+", name):
        # Code generated at run time (oneDNN's JIT kernels) has no symbol, and its address
        # differs between processes: a conv net's "why" listed one address +122 M/call and
        # another -122 M/call. Summed under one name they cancel.
        return JIT_CODE
    return name or symbol.strip()
