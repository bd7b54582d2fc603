"""Comparing the structure of two nested outputs: their leaves' paths and shapes. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def leaf_difference(
    first: Sequence[tuple[str, Iterable[int]]],
    second: Sequence[tuple[str, Iterable[int]]],
    first_name: str,
    second_name: str,
) -> str | None:
    """The first difference between two outputs' ``(path, shape)`` leaves, named, or None.

    ``out[0]['boxes']: shape (7, 4) in the variant vs (9, 4) in eager``; a leaf only one side
    has is named with its shape and the leaf counts.
    """
    for (p1, s1), (p2, s2) in zip(first, second, strict=False):
        if p1 != p2:
            return (
                f"output structure differs: {p1} {tuple(s1)} in {first_name} where "
                f"{second_name} has {p2} {tuple(s2)} ({len(first)} vs {len(second)} output "
                f"tensors)"
            )
        if tuple(s1) != tuple(s2):
            return f"{p1}: shape {tuple(s2)} in {second_name} vs {tuple(s1)} in {first_name}"
    if len(first) != len(second):
        longer, name = (first, first_name) if len(first) > len(second) else (second, second_name)
        path, shape = longer[min(len(first), len(second))]
        return (
            f"output structure differs: only {name} has {path} {tuple(shape)} "
            f"({len(first)} vs {len(second)} output tensors)"
        )
    return None
