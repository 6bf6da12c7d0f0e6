"""aiohttp's server logger for a service's HTTP port (the coordinator's dashboard, the Connect
port of the coordinator and the aggregator, each behind ``fedhh.rpc.http_listener``): a
request that does not parse (an 8 KB cookie, a bad header) is the client's doing, so it is one
WARNING naming the client and the error with at most a short, escaped prefix of what it sent;
aiohttp logged it at ERROR with a traceback quoting the sender's bytes (issue 28).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(__name__)


class RequestLog(logging.LoggerAdapter):
    """aiohttp's server logger (module docstring): errors of a client's request are warnings
    without their bytes; anything else (a bug) keeps its traceback."""

    PREFIX = 60  # characters of a client's error message that are logged, escaped

    def __init__(self, name: str = "dashboard") -> None:
        super().__init__(log, {})
        self.server_name = name

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return msg, kwargs  # keep each call's own extra fields

    @staticmethod
    def _client_error(exc_info: Any) -> HttpProcessingError | None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        return error if isinstance(error, HttpProcessingError) else None

    def _refused(self, level: int, args: tuple[Any, ...], error: HttpProcessingError) -> None:
        detail = ascii(" ".join(str(error.message).split()))
        if len(detail) > self.PREFIX:
            detail = detail[:self.PREFIX] + "..."
        self.log(level, f"{self.server_name}: a malformed request refused",
                 extra={"client": str(args[1]) if len(args) > 1 else "",
                        "status": error.code, "error": f"{type(error).__name__}: {detail}"})

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        error = self._client_error(exc_info)
        if error is not None:
            self._refused(logging.WARNING, (msg, *args), error)
        else:
            super().exception(msg, *args, exc_info=exc_info, **kwargs)

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        error = self._client_error(kwargs.get("exc_info"))
        if error is not None:
            self._refused(logging.DEBUG, (msg, *args), error)
        else:
            super().debug(msg, *args, **kwargs)
