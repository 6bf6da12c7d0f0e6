"""The one reader of an integer a person writes as text: every integer option of every command
(``fedhh.cli.options.integer_in``), every integer knob of a run (``fedhh.config.flags``), and so
every compose or Kubernetes variable that becomes one of those flags. The same text is the
same integer everywhere, or the same refusal.

- Plain integer text is Python's ``int`` of it: ``' 7 '`` is 7 (surrounding blanks are
  ignored), ``+7`` and ``1_000`` are read too; ``0x10`` is refused (no base prefixes).
- Text with ``.``, ``e`` or ``E`` is read as a decimal, exactly (``decimal.Decimal``, never a
  double): ``1e3`` is 1000, ``4.0`` is 4, ``9007199254740993.0`` is 2^53 + 1 and ``-1e25`` is
  -10^25 itself (a double made them 2^53 and -10000000000000000905969664); ``1.5``, ``1e-3``,
  ``inf`` and ``nan`` are refused. A decimal past 1e308 (the largest double) is refused, as
  ``inf`` is, without building its integer (``1e999999999`` would have a billion digits).
- Only ASCII text is read: Python's ``int`` and ``Decimal`` take any script's decimal digits
  and blanks (``int("١٢٣")`` is 123, ``"１e３"`` 1000), which a person reading the command or
  its log would not take for the number the run used; they are refused, as are letters.
- A refusal is ConfigError: "must be an integer, got '2.5'", the text shortened when long.

A range is the caller's to check (its wording names its option and its bound).
"""

from __future__ import annotations

import decimal

from fedhh.errors import ConfigError

#: The largest decimal exponent read: 1e308 is about the largest double; beyond, a decimal is
#: refused as ``inf`` is.
MAX_EXPONENT = 308
#: The longest text a refusal shows whole.
SHOWN_CHARS = 24


def read_integer(text: str) -> int:
    """The integer ``text`` writes exactly (module docstring), else ConfigError."""
    if not text.isascii():
        raise ConfigError(f"must be an integer written with the digits 0-9, got "
                          f"{shown_text(text)}")
    try:
        if any(c in text for c in ".eE"):
            number = decimal.Decimal(text)
            # (finite, at most 1e308, and integral: a NaN or an infinity has no exponent)
            if not (number.is_finite() and number.adjusted() <= MAX_EXPONENT
                    and number == number.to_integral_value()):
                raise ValueError(text)
            return int(number)
        # int(): past 4,300 digits it raises ValueError (CPython's limit on reading an int)
        return int(text)
    except (ValueError, decimal.InvalidOperation):
        raise ConfigError(f"must be an integer, got {shown_text(text)}") from None


def shown_text(text: str) -> str:
    """``text`` quoted for a refusal, its start and length when it is long (a pasted number
    of thousands of digits was repeated whole)."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS - 4]!r}... ({len(text):,} characters)"
