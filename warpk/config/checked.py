"""A schema field's allowed values and the check that enforces them (warpk.config's machinery).

Fields declare their allowed values with `number(...)` and `one_of(...)`; the same metadata
writes the error message, so a bad override always names the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names the key and the allowed values."""


def number(default: float | int | None, lo: float | None = None, hi: float | None = None) -> Any:
    """A numeric field allowed in [lo, hi] (either bound may be open-ended with None)."""
    return field(default=default, metadata={"range": (lo, hi)})


def one_of(default: str, *choices: str) -> Any:
    """A string field restricted to `choices`."""
    return field(default=default, metadata={"choices": choices})


def describe_allowed(f: dataclasses.Field) -> str:
    """Human text for what a field accepts, e.g. 'a number in [0, 1]' or 'one of a, b'."""
    if "choices" in f.metadata:
        return "one of " + ", ".join(f.metadata["choices"])
    kind = "an integer" if "int" in str(f.type) else "a number"
    lo, hi = f.metadata.get("range", (None, None))
    if lo is not None and hi is not None:
        return f"{kind} in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f"{kind} >= {lo:g}"
    if hi is not None:
        return f"{kind} <= {hi:g}"
    return kind


def _fail(key: str, value: Any, f: dataclasses.Field) -> None:
    raise ConfigError(f"{key}={value!r} is not allowed; allowed: {describe_allowed(f)}")


class _Checked:
    """Mixin: checks every `number`/`one_of` field of a schema in `__post_init__`."""

    KEY: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            key = f"{self.KEY}.{f.name}" if self.KEY else f.name
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                _fail(key, value, f)
            if "range" in f.metadata and value is not None:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    _fail(key, value, f)
                lo, hi = f.metadata["range"]
                if (lo is not None and value < lo) or (hi is not None and value > hi):
                    _fail(key, value, f)
        self.check()

    def check(self) -> None:
        """Cross-field checks of one schema; override where fields constrain each other."""
