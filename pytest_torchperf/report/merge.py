"""One results file from the results files of one run split over several runners (shards).

A suite split over CI jobs (a matrix, pytest-split's ``--splits/--group``, ``-k``) writes one
``--torchperf-json`` file per runner. :func:`merge_results` joins them into the file one
unsplit run would have written (each measurement's record as its shard wrote it: verdict,
figures, label), and says what it could not join cleanly:

* a measurement in two shards (pytest-split moves a test between groups when its stored
  durations change, and a retried job writes its file again) is kept once: its most severe
  verdict (a fail over a pass; the first file's where they agree), and named;
* shards of different environments (runner classes) are never mixed: each record stays filed
  under the environment that measured it, and the reports group by environment;
* shards of different commits are refused: their verdicts are not those of one run.

:func:`missing_measurements` lists the measurements that have a baseline in one of the shards'
environments but a result in no shard of that environment: a lost shard (a runner that died, an artifact not
downloaded) would otherwise pass unnoticed; :func:`left_behind` tells from them those whose test
ran in a shard without taking them (renamed or removed in the code, not lost). Pure but for
reading the files and the baseline folder.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_torchperf.judge.coverage import Coverage, coverage
from pytest_torchperf.report.terminal import severity
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.results import (
    RESULTS_FORMAT,
    ResultsFileError,
    read_results_document,
    record_of,
    recorded_strict,
    removed_records,
    with_environments,
)
from pytest_torchperf.variants.registry import variant_of

#: A measurement across shards: environment id, test id, measurement name.
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Duplicate:
    """A measurement that more than one shard measured."""

    key: Key
    #: (file, outcome) of each shard that measured it, in the order the files were given.
    seen: tuple[tuple[str, str], ...]
    #: The file whose record the merge keeps.
    kept: str

    def line(self) -> str:
        """What the merge says about it."""
        _, nodeid, name = self.key
        seen = ", ".join(f"{file}: {outcome}" for file, outcome in self.seen)
        outcomes = {outcome for _, outcome in self.seen}
        why = "the most severe verdict" if len(outcomes) > 1 else "the first file's"
        return (
            f"{nodeid} {name}: measured in {len(self.seen)} shards ({seen}); the merge keeps "
            f"{self.kept}'s ({why}). A test should run in one shard: check how the suite is "
            f"split"
        )


@dataclass(frozen=True)
class MergedResults:
    """The merged results file and what the merge found on the way."""

    #: The merged results file (pytest-benchmark's layout, like each shard).
    document: dict[str, Any]
    #: Its measurements' records, each as its shard wrote it.
    records: list[Record]
    #: (file, measurements it held) per shard, in the order given.
    shards: tuple[tuple[str, int], ...]
    duplicates: tuple[Duplicate, ...]
    #: Environment id -> the shards (their paths as given) that measured in it.
    environments: dict[str, list[str]]
    #: What the merged run gated (None: the shards neither compared nor saved).
    coverage: Coverage | None
    #: Shards (paths as given) that measured but gated none of it: a shard job that lost its
    #: --torchperf-compare (or whose tests all failed before their verdicts).
    ungated: tuple[str, ...] = ()


def _exact(fingerprint: Any) -> Any:
    return fingerprint.get("exact") if isinstance(fingerprint, dict) else fingerprint


def merge_results(paths: Sequence[Path | str], any_commit: bool = False) -> MergedResults:
    """Merge the results files of one run's shards (see the module docstring).

    Raises :class:`~pytest_torchperf.store.results.ResultsFileError` for a file that is not a
    results file, a file given twice, shards of different commits (unless ``any_commit``) and
    one environment id with two different fingerprints.
    """
    if not paths:
        raise ResultsFileError("no results file to merge: give the shards' --torchperf-json files")
    # Each shard by its path as given (`shard-1/results.json`), one file or several: its name
    # alone said `results.json` of one shard, though the command line named its folder.
    names = [str(p) for p in paths]
    seen_paths: dict[Path, str] = {}
    for path in paths:
        resolved = Path(path).resolve()
        if resolved in seen_paths:
            raise ResultsFileError(
                f"results file {path} is given twice; give each shard's file once"
            )
        seen_paths[resolved] = str(path)
    documents = [read_results_document(path) for path in paths]
    if not any_commit:
        _check_one_commit(names, documents)
    environments: dict[str, Any] = {}
    for name, doc in zip(names, documents, strict=True):
        for env_id, fingerprint in (doc["torchperf"].get("environments") or {}).items():
            # The id is a hash of the exact part; the soft part (host name, ...) differs between
            # runners of one class, and the first shard's is kept.
            known = environments.get(env_id)
            if known is not None and _exact(known) != _exact(fingerprint):
                raise ResultsFileError(
                    f"environment {env_id} has two different exact fingerprints ({name} and an "
                    f"earlier file): files written by different versions of pytest-torchperf? "
                    f"Merge the files of one run, written by one version"
                )
            environments.setdefault(env_id, fingerprint)

    kept: dict[Key, tuple[int, str, dict[str, Any], Record]] = {}
    seen: dict[Key, list[tuple[str, str]]] = {}
    order: list[Key | int] = []  # measurement keys, and indexes of benchmarks not ours
    others: list[dict[str, Any]] = []
    shards: list[tuple[str, int]] = []
    shard_notes: list[dict[str, Any]] = []
    for name, doc in zip(names, documents, strict=True):
        count = 0
        shard_envs: list[str] = []
        for bench in doc.get("benchmarks", []):
            record = record_of(bench) if isinstance(bench, dict) else None
            if record is None:  # another tool's benchmark: kept as it is
                order.append(len(others))
                others.append(bench)
                continue
            count += 1
            key = (record.environment_id or "", record.nodeid, record.name)
            if key[0] not in shard_envs:
                shard_envs.append(key[0])
            seen.setdefault(key, []).append((name, record.outcome))
            if key not in kept:
                order.append(key)
                kept[key] = (severity(record.outcome), name, bench, record)
            elif severity(record.outcome) < kept[key][0]:
                kept[key] = (severity(record.outcome), name, bench, record)
        shards.append((name, count))
        shard_notes.append(
            {
                "file": name,
                "benchmarks": count,
                "environments": shard_envs,
                "node": (doc.get("machine_info") or {}).get("node"),
                "commit": (doc.get("commit_info") or {}).get("id"),
                "storage": _folder_read(doc["torchperf"].get("storage")),
            }
        )
    by_environment: dict[str, list[str]] = {}
    for note in shard_notes:
        for env_id in note["environments"]:
            by_environment.setdefault(env_id, []).append(note["file"])
    benchmarks = [others[item] if isinstance(item, int) else kept[item][2] for item in order]
    records = [kept[item][3] for item in order if not isinstance(item, int)]
    records = with_environments(records, environments)  # as one results file's are read
    # Measurements only the baseline had (side A's, removed in B): each once, after the rest.
    removed = {
        (r.nodeid, r.name): (r, raw)
        for doc in documents
        for r, raw in zip(removed_records(doc), doc["torchperf"].get("removed") or (), strict=True)
    }
    records += [r for r, _ in removed.values()]
    duplicates = tuple(
        Duplicate(key, tuple(files), kept[key][1]) for key, files in seen.items() if len(files) > 1
    )
    shard_modes = [(doc["torchperf"].get("coverage") or {}).get("mode") for doc in documents]
    modes = set(shard_modes) - {None}
    ungated = tuple(
        name
        for (name, count), mode in zip(shards, shard_modes, strict=True)
        if count and mode is None
    )
    cov = coverage(records, comparing="compare" in modes) if modes else None
    first = documents[0]
    folders = {note["storage"] for note in shard_notes}
    known, strict = recorded_strict(documents)
    document = {
        **{k: v for k, v in first.items() if k not in ("benchmarks", "torchperf")},
        "benchmarks": benchmarks,
        "datetime": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "torchperf": {
            "format": RESULTS_FORMAT,
            "environments": environments,
            "coverage": cov.to_dict() if cov is not None else None,
            # The folder every shard read (the first's paths); None where they read different
            # ones (or older files do not say).
            "storage": first["torchperf"].get("storage") if len(folders) == 1 else None,
            # What made the shards' run strict as a whole (their own files' key; absent where
            # one of them, written before it was recorded, does not say).
            **({"strict": strict} if known else {}),
            # Where each part came from (the machine_info and commit_info above are the
            # first shard's).
            "shards": shard_notes,
            **({"removed": [raw for _, raw in removed.values()]} if removed else {}),
        },
    }
    return MergedResults(document, records, tuple(shards), duplicates, by_environment, cov, ungated)


def _folder_read(storage: object) -> str | None:
    """A shard's baseline folder as shards are compared: relative to its rootdir where it has one
    (runners check the project out to different paths), else its absolute path."""
    if not isinstance(storage, dict):
        return None
    folder = storage.get("relative") or storage.get("path")
    return folder if isinstance(folder, str) else None


def short_names(paths: Sequence[Path]) -> list[str]:
    """The names messages use for files read together (a history run's files):
    the file name, or the path where two files share a name (``shard-1/results.json``)."""
    names = [p.name for p in paths]
    return [p.name if names.count(p.name) == 1 else str(p) for p in paths]


def _check_one_commit(names: Sequence[str], documents: Sequence[Mapping[str, Any]]) -> None:
    commits = {
        name: (doc.get("commit_info") or {}).get("id")
        for name, doc in zip(names, documents, strict=True)
    }
    known = {name: sha for name, sha in commits.items() if sha}
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{name} at {str(sha)[:10]}" for name, sha in known.items())
        raise ResultsFileError(
            f"the results files were written at different commits ({listed}): shards of one run "
            f"share a commit, and verdicts of different commits are not one run's. Merge the "
            f"files of one run, or pass --any-commit to merge them anyway"
        )


def missing_measurements(records: Iterable[Record], store: BaselineStore) -> list[Key]:
    """Measurements stored under one of the records' environments that no record of that
    environment measured (their ``(environment, test, measurement)``, sorted)."""
    records = list(records)
    environments = {r.environment_id for r in records if r.environment_id}
    # Per environment: a test measured on one runner class does not stand in for its result on
    # another class whose shards ran too.
    measured = {(str(r.environment_id), r.nodeid, r.name) for r in records}
    missing = {
        (env_id, nodeid, name)
        for env_id, nodeid, name, sessions in store.measurements()
        if env_id in environments and sessions and (env_id, nodeid, name) not in measured
    }
    return sorted(missing)


def left_behind(records: Iterable[Record], missing: Iterable[Key]) -> list[Key]:
    """Of ``missing`` (:func:`missing_measurements`), those whose test ran in a shard of their
    environment and took other measurements of the same variant, but not them: renamed or
    removed from the test, which its own run said, not a shard's results file that went
    missing. Of the same variant: shards split by ``--torchperf-variants`` share test ids, and a
    lost shard of compiled variants must still fail the merge."""
    ran = {(str(r.environment_id), r.nodeid, r.variant or "eager") for r in records}
    return [
        (env, test, name) for env, test, name in missing if (env, test, variant_of(name)) in ran
    ]
