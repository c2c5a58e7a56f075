"""Kubernetes-shaped building blocks shared by every kind: the strict base model, ObjectMeta,
Conditions, and the name/label rules Kubernetes applies to them.

Every model in api/ derives from `StrictModel`: camelCase on the wire, snake_case in Python,
unknown fields rejected, and every integer field a strict 64-bit integer (Kubernetes' decoder
refuses `1e9`, `"5"` and `true` where it wants an integer, and nothing fits beyond int64);
fields that are int32 in Kubernetes (counts, priorities) say so with `Int32`. Every top-level
kind derives from `Object`, which adds apiVersion, kind, metadata, the name rule of its kind
and a `semantic_errors()` hook for the rules a schema cannot express.

Called by: every kind module in api/v1alpha1 and api/k8s, and api.codec.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ConfigDict, Field, Strict
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from api.errors import FieldError, Path

__all__ = [
    "API_VERSION",
    "GROUP",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "VERSION",
    "Condition",
    "ConditionStatus",
    "Int32",
    "Object",
    "ObjectMeta",
    "OwnerReference",
    "StrictModel",
    "build_schemas",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "find_duplicates",
    "label_key_errors",
    "label_map_errors",
    "label_value_errors",
]

GROUP = "multiq.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
Int32 = Annotated[int, Strict(), Ge(INT32_MIN), Le(INT32_MAX)]
"""An integer field that Kubernetes declares int32 (replica counts, parallelism, priority)."""


class StrictModel(BaseModel):
    """Base of every contract model: camelCase aliases, unknown fields rejected, and fields at
    an empty default ("", [], {}) left out of the serialized form."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        validate_assignment=False,
        ser_json_timedelta="float",
        # Built on first use, after __pydantic_init_subclass__ has marked the empty defaults.
        defer_build=True,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _omit_empty_defaults(cls)
        _strict_int64_fields(cls)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict users write and the hub stores: camelCase, no nulls, and no
        field left at an empty default (`labels: {}`, `finalizers: []`, `name: ''`)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def build_schemas() -> int:
    """Build the schema of every contract model imported so far that is not built yet, and
    return how many were built. Models are built on first use (`defer_build`), which suits
    qctl — a command pays only for the models it uses — but a server would pay for them
    inside its first requests (a third of a second for the agent's first offer). The hub and
    the agent call this at start-up, before `gc.freeze()`."""
    built = 0
    pending: list[type[BaseModel]] = [StrictModel]
    while pending:
        model = pending.pop()
        pending += model.__subclasses__()
        if not model.__pydantic_complete__ and model.__module__.startswith("api."):
            model.model_rebuild()
            built += 1
    return built


def _is_empty_str(value: object) -> bool:
    return type(value) is str and not value


def _is_empty_list(value: object) -> bool:
    return type(value) is list and not value


def _is_empty_dict(value: object) -> bool:
    return type(value) is dict and not value


def _empty_default(field: FieldInfo) -> Callable[[object], bool] | None:
    """`exclude_if` of a field whose default is "", [] or {}: true for a value equal to it.

    Kubernetes' `omitempty`: the serialized form leaves such a field out, and decoding puts
    the default back, so decode(encode(x)) == x. A non-empty default (`operator: Equal`) is
    always written; a None default is left out by `exclude_none`. Plain functions, not
    callable objects: pydantic calls them for every such field of every model it serializes,
    and a function is the cheapest thing for it to call."""
    if field.default_factory is list:
        return _is_empty_list
    if field.default_factory is dict:
        return _is_empty_dict
    if type(field.default) is str and field.default == "":
        return _is_empty_str
    return None


def _omit_empty_defaults(cls: type[BaseModel]) -> None:
    """Mark every field of `cls` with an empty default to be left out when serialized: the
    rule `api.k8s.pod.CompactModel` applies to lists and maps, for strings too and for every
    model. Field-level, so it holds whatever model serializer a subclass adds; it must run
    before the schema is built (hence `defer_build`)."""
    for field in cls.model_fields.values():
        if field.exclude_if is None and (rule := _empty_default(field)) is not None:
            field.exclude_if = rule


def _strict_int64_fields(cls: type[BaseModel]) -> None:
    """Make every field declared `int` or `int | None` a strict int64. Field-level, before the
    schema is built (as `_omit_empty_defaults`); bounds a field declares itself (`Int32`,
    `Field(ge=1)`) are kept."""
    for field in cls.model_fields.values():
        if field.annotation not in (int, int | None):
            continue
        rules = field.metadata
        if not any(isinstance(rule, Strict) for rule in rules):
            rules.append(Strict())
        if not any(isinstance(rule, Ge | Gt) for rule in rules):
            rules.append(Ge(INT64_MIN))
        if not any(isinstance(rule, Le | Lt) for rule in rules):
            rules.append(Le(INT64_MAX))


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(StrictModel):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class OwnerReference(StrictModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(StrictModel):
    """metav1.ObjectMeta: every field an API server returns, so that `kubectl get -o yaml`
    output decodes and encodes back unchanged. Unknown keys are still rejected."""

    name: str = ""
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    # Server-side apply bookkeeping; kept verbatim (fieldsV1 keys are `f:spec`, `k:{...}`).
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)


@functools.cache
def _plural(kind: str) -> str:
    """`Object.plural`, worked out once per kind: store keys are built from it at every
    write."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


class Object(StrictModel):
    """Base of every top-level kind. Subclasses set `KIND`, `NAMESPACED` and the kind Literal."""

    KIND: ClassVar[str] = ""
    API_VERSION: ClassVar[str] = API_VERSION
    NAMESPACED: ClassVar[bool] = False
    # Short names for qctl, like kubectl's (e.g. "cq" for ClusterQueue).
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    # Most names are DNS-1123 subdomains (253 characters); a kind whose name becomes a label
    # value (a Job's, in `job-name`) must be a DNS-1123 label (63).
    NAME_IS_LABEL: ClassVar[bool] = False

    api_version: str = Field(default=API_VERSION)
    kind: str = ""

    @classmethod
    def plural(cls) -> str:
        """The resource name in URLs, as Kubernetes forms it: clusterqueues, topologies."""
        return _plural(cls.KIND)

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def semantic_errors(self) -> list[FieldError]:
        """Every rule a schema cannot express; empty when the object is valid."""
        return list(self._metadata_errors())

    def _metadata_errors(self) -> Iterator[FieldError]:
        meta = Path("metadata")
        name_errors = dns1123_label_errors if self.NAME_IS_LABEL else dns1123_subdomain_errors
        if not self.metadata.name and not self.metadata.generate_name:
            yield FieldError.required(meta.child("name"), "name or generateName is required")
        elif self.metadata.name:
            yield from name_errors(meta.child("name"), self.metadata.name)
        elif self.metadata.generate_name:
            # The server appends 5 characters; the prefix alone may end in '-' (`train-`).
            generated = self.metadata.generate_name + GENERATED_SUFFIX
            for error in name_errors(meta.child("generateName"), generated):
                yield FieldError.invalid(
                    meta.child("generateName"),
                    self.metadata.generate_name,
                    f"with the {len(GENERATED_SUFFIX)} characters the server appends: "
                    f"{error.detail}",
                )
        if self.NAMESPACED:
            if self.metadata.namespace:
                yield from dns1123_label_errors(meta.child("namespace"), self.metadata.namespace)
        elif self.metadata.namespace:
            yield FieldError.forbidden(
                meta.child("namespace"), f"{self.KIND} is cluster-scoped: it has no namespace"
            )
        yield from label_map_errors(meta.child("labels"), self.metadata.labels)
        for key in self.metadata.annotations:
            yield from label_key_errors(meta.child("annotations"), key)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    def key(self) -> str:
        """`namespace/name` for namespaced kinds, `name` otherwise."""
        if self.NAMESPACED:
            return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"
        return self.metadata.name


# --- name and label rules (k8s.io/apimachinery/pkg/util/validation) --------------------------

GENERATED_SUFFIX = "x0000"
"""As long as what the hub appends to a generateName; used to check the name it will make."""

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _dns1123_label_errors(path: Path, value: str) -> Iterator[FieldError]:
    if len(value) > 63:
        yield FieldError.invalid(path, value, "must be no more than 63 characters")
    if not _DNS1123_LABEL.fullmatch(value):
        yield FieldError.invalid(
            path,
            value,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        )


def _dns1123_subdomain_errors(path: Path, value: str) -> Iterator[FieldError]:
    if len(value) > 253:
        yield FieldError.invalid(path, value, "must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        yield FieldError.invalid(
            path,
            value,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )


def _label_key_errors(path: Path, key: str) -> Iterator[FieldError]:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        yield FieldError.invalid(path, key, "prefix part must be a lowercase RFC 1123 subdomain")
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        yield FieldError.invalid(
            path,
            key,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, with at most 63 characters",
        )


def _label_value_errors(path: Path, value: str) -> Iterator[FieldError]:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        yield FieldError.invalid(
            path,
            value,
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character, with at most 63 "
            "characters",
        )


_KNOWN_GOOD_KEPT = 4096


class _KnownGood:
    """A name or label rule that remembers the values it found nothing wrong with. These
    rules read the value alone, and the same names, label keys and values come back in every
    object (the same annotation keys on every workload), so a value checked once is not
    matched again. At most `_KNOWN_GOOD_KEPT` values per rule (`good`); the memory starts
    over when full."""

    __slots__ = ("good", "rule")

    def __init__(self, rule: Callable[[Path, str], Iterator[FieldError]]) -> None:
        self.rule = rule
        self.good: set[str] = set()

    def __call__(self, path: Path, value: str) -> Sequence[FieldError]:
        known = type(value) is str
        if known and value in self.good:
            return ()
        errors = list(self.rule(path, value))
        if known and not errors:
            if len(self.good) >= _KNOWN_GOOD_KEPT:
                self.good.clear()
            self.good.add(value)
        return errors


dns1123_label_errors = _KnownGood(_dns1123_label_errors)
dns1123_subdomain_errors = _KnownGood(_dns1123_subdomain_errors)
label_key_errors = _KnownGood(_label_key_errors)
label_value_errors = _KnownGood(_label_value_errors)


def label_map_errors(path: Path, labels: Mapping[str, str]) -> Iterator[FieldError]:
    for key, value in labels.items():
        yield from label_key_errors(path, key)
        yield from label_value_errors(path.key(key), value)


def find_duplicates(values: list[str]) -> list[int]:
    """Indexes of values already seen earlier in the list."""
    seen: set[str] = set()
    dups = []
    for i, v in enumerate(values):
        if v in seen:
            dups.append(i)
        seen.add(v)
    return dups
