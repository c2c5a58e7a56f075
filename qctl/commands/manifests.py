"""Decoding manifest files for `qctl validate` and `qctl apply`: MultiQ's kinds, the upstream
kinds the hub accepts, and Kueue's own queue setups (converted by api.kueue first).

`decode_files` turns `-f` arguments into one `Decoded` per document, in file order: the typed
objects it became (a Kueue ClusterQueue with a MultiKueue check becomes two), a MemberCluster
that must have joined (a MultiKueueCluster), a note saying what a Kueue document became, or
the errors it has, each line naming the file, the document and the field.

Called by: qctl.commands.validate, qctl.commands.apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api.codec import decode, load_documents
from api.errors import ApiError, ObjectInvalidError
from api.kinds import REGISTRY
from api.kueue import from_kueue
from api.meta import Object
from qctl.files import read_manifests

__all__ = ["Decoded", "decode_files"]


@dataclass
class Decoded:
    """One document of one file: what it became, or what is wrong with it."""

    where: str
    objects: list[Object] = field(default_factory=list)
    member_cluster: str | None = None
    note: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _problems(exc: ApiError) -> list[str]:
    if isinstance(exc, ObjectInvalidError):
        label = f"{exc.kind} {exc.name!r}" if exc.name else exc.kind
        return [f"({label}): {err}" for err in exc.errors]
    return [str(exc)]


def decode_files(filenames: list[str]) -> list[Decoded]:
    """Every document of every file named, decoded; a file that is not YAML/JSON is one
    Decoded with its problem."""
    decoded: list[Decoded] = []
    for source, text in read_manifests(filenames):
        try:
            docs = load_documents(text)
        except ApiError as exc:
            decoded.append(Decoded(where=source, problems=[str(exc)]))
            continue
        converted = from_kueue([doc.body for doc in docs])
        for doc, result in zip(docs, converted, strict=True):
            item = Decoded(where=f"{source}: document {doc.index}")
            decoded.append(item)
            if isinstance(result, ApiError):
                item.problems += _problems(result)
                continue
            item.member_cluster = result.member_cluster
            item.note = result.note
            for body in result.objects:
                try:
                    item.objects.append(decode(body, REGISTRY))
                except ApiError as exc:
                    item.problems += _problems(exc)
    return decoded
