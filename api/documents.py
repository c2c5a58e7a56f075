"""Reading YAML or JSON text into documents: one mapping per document, duplicate keys refused
as the Kubernetes API server refuses them, every syntax error named by line and column.

Apart from api.codec (which decodes documents into models) so that a reader that only needs
the documents — `qctl submit`, whose start-up time is its throughput in a shell loop — does not
import pydantic. api.codec re-exports both names.

Called by: api.codec, qctl submit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from api.errors import DecodeError

__all__ = ["Document", "load_documents"]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, as the Kubernetes API server does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a file: its 0-based index and the parsed mapping."""

    index: int
    body: dict[str, Any]


def load_documents(text: str) -> list[Document]:
    """Parse YAML or JSON text with one or more documents; empty documents are skipped.

    Raises DecodeError naming the line and column of a syntax error, or the index of a
    document that is not a mapping.
    """
    try:
        raw = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DecodeError(f"invalid YAML{where}: {problem}") from exc
    docs: list[Document] = []
    for index, body in enumerate(raw):
        if body is None:
            continue
        if not isinstance(body, dict):
            raise DecodeError(f"document {index} is a {type(body).__name__}, not an object")
        docs.append(Document(index, body))
    return docs
