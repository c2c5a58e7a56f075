"""Kubernetes resource quantities, parsed and compared exactly.

Owns the `Quantity` value type used by every resource amount in the contract (quotas, pod
requests, capacity reports). Values are held as exact fractions, never floats: "0.1" + "0.2"
equals "300m", and "1Gi" is 1073741824 exactly. The admission engine and placement work in
integer milli-units (`Quantity.milli`), which is how Kubernetes itself compares CPU.

Every quantity a model accepts fits in int64 milli-units (`MAX_MILLI`): beyond that no
Kubernetes component can count it (`cpu: 1e30` and `memory: 9e18Ei` are refused, naming the
field). Arithmetic on accepted quantities (sums over a fleet) is exact and unbounded.

Called by: every api/ model with a resource field, the engine snapshot builders, qctl output.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = [
    "MAX_MILLI",
    "Quantity",
    "QuantityError",
    "parse_field",
    "parse_quantity",
    "resource_amount",
]

MAX_MILLI = 2**63 - 1
# A longer text cannot be a quantity within MAX_MILLI (19 digits, a point, 9 decimals, a
# suffix): refused before it is read, so no huge Fraction is ever made from input.
_MAX_TEXT_CHARS = 64

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Kubernetes' grammar: <sign><digits>[.<digits>]<suffix>, suffix binary, decimal or exponent.
_QUANTITY_RE = re.compile(
    r"^(?P<sign>[+-])?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_NANO = Fraction(1, 10**9)
# Suffixes from the largest factor down, the order canonical() tries them in.
_BINARY_DESCENDING = tuple(sorted(_BINARY.items(), key=lambda kv: kv[1], reverse=True))
_DECIMAL_DESCENDING = tuple(sorted(_DECIMAL.items(), key=lambda kv: kv[1], reverse=True))


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


class Quantity:
    """An exact, immutable resource amount with the format (binary or decimal) it was written in.

    Equality, ordering and hashing use the exact value only, so "1Gi" == "1073741824" and
    "500m" == "0.5". Values below one nano-unit round up, as in Kubernetes.
    """

    __slots__ = ("_binary", "_text", "_value")

    def __init__(self, value: Fraction | int, *, binary: bool = False) -> None:
        frac = Fraction(value)
        # Kubernetes keeps at most nano precision and rounds up (away from zero for positives).
        scaled = frac / _NANO
        if scaled.denominator != 1:
            ceil = -((-scaled.numerator) // scaled.denominator)
            frac = Fraction(ceil) * _NANO
        self._value = frac
        self._binary = binary
        self._text: str | None = None  # canonical(), computed once: every dump writes it

    @classmethod
    def _exact(cls, value: Fraction, binary: bool = False) -> Quantity:
        """A quantity of a value already a whole number of nano-units (a sum, difference or
        multiple of quantities, or milli-units): nothing to round, so no division."""
        q = cls.__new__(cls)
        q._value = value
        q._binary = binary
        q._text = None
        return q

    # construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | int | float | Quantity) -> Quantity:
        """Parse a quantity as Kubernetes does; ints and floats are read through their text."""
        if isinstance(text, Quantity):
            return text
        if isinstance(text, bool):
            raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
        if isinstance(text, int):
            return cls(text)
        if isinstance(text, float):
            if not math.isfinite(text):
                raise QuantityError(f"quantities must be finite, not {text!r}")
            return cls.parse(repr(text))
        if not isinstance(text, str):
            raise QuantityError(f"quantities must be strings or numbers, not {type(text).__name__}")
        return _parse_text(text)

    @classmethod
    def _from_text(cls, text: str) -> Quantity:
        match = _QUANTITY_RE.match(text.strip())
        if not match or text != text.strip():
            raise QuantityError(
                f"quantities must match the regular expression "
                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {text!r}"
            )
        number = Fraction(match["number"])
        if match["sign"] == "-":
            number = -number
        suffix = match["suffix"] or ""
        if suffix in _BINARY:
            return cls(number * _BINARY[suffix], binary=True)
        if suffix in _DECIMAL:
            return cls(number * _DECIMAL[suffix])
        exponent = int(suffix[1:])
        if abs(exponent) > 60:
            raise QuantityError(f"quantity exponent out of range in {text!r}")
        return cls(number * Fraction(10) ** exponent)

    @classmethod
    def from_milli(cls, milli: int) -> Quantity:
        return cls._exact(Fraction(milli, 1000))

    # views --------------------------------------------------------------------------------

    @property
    def value(self) -> Fraction:
        """The exact value in base units (cores, bytes, devices)."""
        return self._value

    @property
    def is_binary(self) -> bool:
        """Written in binary units (Ki, Mi, …), which canonical() keeps while it can."""
        return self._binary

    def milli(self) -> int:
        """The value in milli-units, rounded up as Kubernetes' MilliValue does."""
        value = self._value  # (integer arithmetic: no Fraction is made for the product)
        return -((-value.numerator * 1000) // value.denominator)

    def units(self) -> int:
        """The value in whole units, rounded up (Kubernetes' Value)."""
        return -((-self._value.numerator) // self._value.denominator)

    def is_zero(self) -> bool:
        return self._value.numerator == 0

    def is_negative(self) -> bool:
        # (a Fraction's sign is its numerator's: its denominator is always positive)
        return self._value.numerator < 0

    # arithmetic and comparison ----------------------------------------------------------

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity._exact(self._value + other._value, self._binary and other._binary)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity._exact(self._value - other._value, self._binary and other._binary)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity._exact(self._value * factor, self._binary)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity._exact(-self._value, self._binary)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        return self._value < other._value

    def __le__(self, other: Quantity) -> bool:
        return self._value <= other._value

    def __gt__(self, other: Quantity) -> bool:
        return self._value > other._value

    def __ge__(self, other: Quantity) -> bool:
        return self._value >= other._value

    def __hash__(self) -> int:
        return hash(self._value)

    # text ----------------------------------------------------------------------------------

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    def canonical(self) -> str:
        """The shortest exact spelling: largest suffix with an integral mantissa.

        Binary-written values keep binary suffixes while they stay integral in bytes; everything
        else uses decimal SI suffixes, down to nano. parse(canonical()) always equals self.
        """
        if self._text is None:
            self._text = _spelling(self._value, self._binary)
        return self._text

    @staticmethod
    def _spell(value: Fraction, binary: bool) -> str:
        if value == 0:
            return "0"
        sign = "-" if value < 0 else ""
        magnitude = abs(value)
        if binary and magnitude.denominator == 1:
            whole = magnitude.numerator
            for suffix, bfactor in _BINARY_DESCENDING:
                if whole % bfactor == 0 and whole >= bfactor:
                    return f"{sign}{whole // bfactor}{suffix}"
            return f"{sign}{whole}"
        for suffix, dfactor in _DECIMAL_DESCENDING:
            mantissa = magnitude / dfactor
            if mantissa.denominator == 1 and mantissa >= 1:
                return f"{sign}{mantissa.numerator}{suffix}"
        raise AssertionError(f"unreachable: {value} is a multiple of one nano")

    # pydantic ------------------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            parse_field,
            json_schema_input_schema=core_schema.union_schema(
                [core_schema.str_schema(), core_schema.int_schema(), core_schema.float_schema()]
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda q: q.canonical(), when_used="always"
            ),
        )


@functools.lru_cache(maxsize=4096)
def _spelling(value: Fraction, binary: bool) -> str:
    """canonical() of a value, spelled once per distinct value: quantities made by arithmetic
    (usage, headroom, totals) are new objects, but their values repeat."""
    return Quantity._spell(value, binary)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    """Parsed once per distinct spelling: every pod and report repeats the same few ("100m",
    "64Mi"), and a Quantity is immutable, so sharing one is safe. Errors are not cached."""
    return Quantity._from_text(text)


def parse_field(raw: Any) -> Quantity:
    """A quantity field's value read as the models read it (ValueError if it is not one):
    `Quantity.parse`, within the text length and the 64-bit milli-unit range."""
    if isinstance(raw, str) and len(raw) > _MAX_TEXT_CHARS:
        raise ValueError(f"quantities have at most {_MAX_TEXT_CHARS} characters")
    try:
        quantity = Quantity.parse(raw)
    except QuantityError as exc:
        raise ValueError(str(exc)) from exc
    if abs(quantity.milli()) > MAX_MILLI:
        raise ValueError(
            f"must be at most {MAX_MILLI}m in magnitude (a 64-bit count of milli-units)"
        )
    return quantity


def parse_quantity(text: str | int | float) -> Quantity:
    return Quantity.parse(text)


_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage"})


def resource_amount(resource: str, milli: int) -> Quantity:
    """`milli` milli-units of `resource` as people write them: amounts of bytes (memory,
    ephemeral-storage, hugepages-*) in binary units such as 4Gi, the rest in decimal."""
    binary = resource in _BYTE_RESOURCES or resource.startswith("hugepages-")
    return Quantity._exact(Fraction(milli, 1000), binary)
