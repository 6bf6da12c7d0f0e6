"""Structured logs and the Prometheus endpoint of a service (configured in entry points only)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from fedhh.rpc.tls import TlsFiles


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    _standard: frozenset[str] = frozenset(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._standard and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", service: str = "") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if service:
        old_factory = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = old_factory(*args, **kwargs)
            record.service = service
            return record

        logging.setLogRecordFactory(factory)


def start_metrics(port: int | None, host: str = "127.0.0.1",
                  tls: TlsFiles | None = None) -> int | None:
    """Expose Prometheus metrics on ``host:port`` (port 0: OS-chosen; None: off), over HTTPS
    with the service's certificate when it has one, like every other listener.

    Returns the bound port.
    """
    if port is None:
        return None
    from prometheus_client import start_http_server

    if tls is None:
        server, _thread = start_http_server(port, addr=host)
    else:
        server, _thread = start_http_server(port, addr=host, certfile=str(tls.cert),
                                            keyfile=str(tls.key))
    return int(server.server_port)


def write_ready(path: str | os.PathLike[str], content: dict[str, Any]) -> None:
    """Announce readiness: ``content`` as JSON, written atomically (readers never see half)."""
    tmp = Path(f"{os.fspath(path)}.tmp")
    tmp.write_text(json.dumps(content))
    os.replace(tmp, path)
