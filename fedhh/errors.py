"""The one base class of every domain error fedhh raises.

Services map these to status codes in one place; anything else is a bug.
"""


class FedhhError(Exception):
    """Base class of fedhh's domain errors (bad input, impossible targets, protocol violations)."""


class ConfigError(FedhhError, ValueError):
    """A configuration value is out of its allowed range; the message names the value."""


class DatasetError(FedhhError):
    """A dataset file or directory is missing, malformed or corrupt."""


class PrivacyError(FedhhError, ValueError):
    """An impossible privacy target, or a spend that would exceed the declared budget."""


class AuthenticationError(FedhhError):
    """A request without valid credentials (a service answers UNAUTHENTICATED)."""


class NotFoundError(FedhhError):
    """An unknown run, round or device (NOT_FOUND)."""


class ConflictError(FedhhError):
    """The request conflicts with stored state: a duplicate or replayed message (ALREADY_EXISTS)."""


class StateError(FedhhError):
    """The request is valid but not now: wrong stage, round closed, run finished
    (FAILED_PRECONDITION)."""


class StoreDamaged(FedhhError):
    """Stored state that does not read back as what was written: a damaged or foreign store
    (DATA_LOSS). The message names the record and the field; the store is left as it is."""


class RateLimited(FedhhError):
    """Too many requests from one caller, or overall; retry later (RESOURCE_EXHAUSTED)."""


class RoundAborted(FedhhError):
    """A round attempt released nothing usable; ``reached_unmask`` says whether a sum may exist
    anyway (then the attempt is charged), ``contributors`` the verified count if known."""

    def __init__(self, reason: str, *, reached_unmask: bool = False,
                 contributors: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.reached_unmask = reached_unmask
        self.contributors = contributors


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters with its full length said, for messages
    that name a value someone else sent: a message is one line, never a copy of a megabyte."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[:limit]}... ({size} characters)"
