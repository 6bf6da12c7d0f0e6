"""The one reader of an integer a person writes as text (``read_integer``), and the one of a
number (``read_number``): every integer and number option of every command
(``fedhh.cli.options``), every knob of a run (``fedhh.config.flags``, the per-round lists), and
so every compose or Kubernetes variable that becomes one of those flags. The same text is the
same number everywhere, or the same refusal.

- Plain integer text is Python's ``int`` of it: ``' 7 '`` is 7 and ``+7`` is read too; ``0x10``
  is refused (no base prefixes). Surrounding ASCII blanks are ignored by both readers (what a
  shell or a YAML file leaves around a value; the number is not in doubt).
- ``_`` is refused by both (``1_000``, ``1_0e2``): Python's digit grouping, not a number as an
  operator writes one, and ``1_0`` reads as 10 to Python, as "1 or 0" to a person.
- Text with ``.``, ``e`` or ``E`` is read as a decimal, exactly (``decimal.Decimal``, never a
  double): ``1e3`` is 1000, ``4.0`` is 4, ``9007199254740993.0`` is 2^53 + 1 and ``-1e25`` is
  -10^25 itself (a double made them 2^53 and -10000000000000000905969664); ``1.5``, ``1e-3``,
  ``inf`` and ``nan`` are refused. A decimal past 1e308 (the largest double) is refused, as
  ``inf`` is, without building its integer (``1e999999999`` would have a billion digits).
- ``read_number`` is Python's ``float`` of the text otherwise: ``inf`` and ``nan`` are read,
  each caller decides whether its option takes them. A number other than 0 that no double holds
  (``1e-400``, nearer 0 than 4.9e-324) is refused as such: ``float`` makes it 0, and the
  caller's range refusal then spoke of a 0 nobody typed ("delta must be in (0, 1), got 0.0").
- Only ASCII text is read: Python's ``int``, ``Decimal`` and ``float`` take any script's decimal
  digits and blanks (``int("١٢٣")`` is 123, ``"１e３"`` 1000, ``float("١.٥")`` 1.5), which a
  person reading the command or its log would not take for the number the run used; they are
  refused, as are letters.
- A refusal is ConfigError: "must be an integer, got '2.5'", "must be a number, got 'x'", the
  text shortened when long.

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
    _check_written(text, "an integer")
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


def read_number(text: str) -> float:
    """The float ``text`` writes (module docstring: ``inf`` and ``nan`` included), else
    ConfigError."""
    _check_written(text, "a number")
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"must be a number, got {shown_text(text)}") from None
    # (its digits decide, not its exponent: Decimal refuses an exponent past 10^18 with
    # InvalidOperation, and 1e-99999999999999999999, which float reads as 0, was a traceback)
    if value == 0 and decimal.Decimal(text.lower().partition("e")[0]) != 0:
        raise ConfigError(f"got {shown_text(text)}, nearer 0 than the smallest double "
                          "(4.9e-324): it would be read as 0, not as written")
    return value


def _check_written(text: str, what: str) -> None:
    """Refuse what Python reads as a number and an operator would not write as one."""
    if not text.isascii():
        raise ConfigError(f"must be {what} written with the digits 0-9, got "
                          f"{shown_text(text)}")
    if "_" in text:
        raise ConfigError(f"must be {what} written without '_', got {shown_text(text)}")


def shown_text(text: str) -> str:
    """``text`` quoted for a refusal, its start and length when it is long (a pasted number
    of thousands of digits was repeated whole)."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS - 4]!r}... ({len(text):,} characters)"
