"""Reading YAML or JSON text into documents: one mapping per document, duplicate keys refused
as the Kubernetes API server refuses them, every syntax error named by line and column.

Apart from api.codec (which decodes documents into models) so that a reader that only needs
the documents — `qctl submit`, whose start-up time is its throughput in a shell loop — does not
import pydantic. api.codec re-exports both names.

Called by: api.codec, qctl submit.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

__all__ = ["Document", "load_documents"]

# Neither yaml nor api.errors (which imports dataclasses) is imported until needed: a JSON
# manifest needs no YAML parser, and only a failure needs an error class. For `qctl submit`
# each is a noticeable part of a command's life.


@cache
def _strict_loader() -> Any:
    """yaml's SafeLoader (its C parser when libyaml is there) refusing duplicate keys, as the
    Kubernetes API server does."""
    import yaml  # noqa: PLC0415 - see above

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def construct_mapping(loader: Any, node: Any) -> dict[Any, Any]:
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

    loader: Any = type("StrictLoader", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return loader


class Document:
    """One document of a file: its 0-based index and the parsed mapping."""

    __slots__ = ("body", "index")

    def __init__(self, index: int, body: dict[str, Any]) -> None:
        self.index = index
        self.body = body

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Document) and (self.index, self.body) == (other.index, other.body)

    __hash__ = None  # type: ignore[assignment]  # the body is a dict

    def __repr__(self) -> str:
        return f"Document(index={self.index!r}, body={self.body!r})"


def _decode_error(message: str) -> Exception:
    from api.errors import DecodeError  # noqa: PLC0415 - see above

    return DecodeError(message)


class _DuplicateFieldError(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise _DuplicateFieldError(f"duplicate field {key!r}")
        mapping[key] = value
    return mapping


def _parse(text: str) -> list[Any]:
    if text.lstrip().startswith("{"):
        # JSON (a YAML document too): parsed without the YAML parser. Text that is not JSON
        # after all is YAML's to read, and to name the error of.
        try:
            return [json.loads(text, object_pairs_hook=_refuse_duplicates)]
        except _DuplicateFieldError as exc:
            raise _decode_error(f"invalid JSON: {exc}") from exc
        except ValueError:
            pass
    import yaml  # noqa: PLC0415 - see above

    try:
        return list(yaml.load_all(text, Loader=_strict_loader()))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise _decode_error(f"invalid YAML{where}: {problem}") from exc


def load_documents(text: str) -> list[Document]:
    """Parse YAML or JSON text with one or more documents; empty documents are skipped.

    Raises DecodeError naming the line and column of a syntax error, or the index of a
    document that is not a mapping.
    """
    docs: list[Document] = []
    for index, body in enumerate(_parse(text)):
        if body is None:
            continue
        if not isinstance(body, dict):
            raise _decode_error(f"document {index} is a {type(body).__name__}, not an object")
        docs.append(Document(index, body))
    return docs
