"""The fedhh code a run is computed by: ``code_fingerprint``, a digest of the package's sources
and data (codebooks), which tells a changed simulator apart even under one version number.
Dask workers must run the client's (fedhh.experiments.cluster), and every stored run and report
records the code that made it (``code_identity``)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import fedhh


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over this process's fedhh package: every source and data file (codebooks
    included), by path relative to the package, in path order."""
    root = Path(fedhh.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".json")
                       and "__pycache__" not in p.parts):
        data = path.read_bytes()
        digest.update(b"%s\0%d\0" % (path.relative_to(root).as_posix().encode(), len(data)))
        digest.update(data)
    return digest.hexdigest()


def code_identity() -> dict[str, str]:
    """This process's fedhh: its version and ``code_fingerprint``."""
    return {"fedhh": fedhh.__version__, "digest": code_fingerprint()}


__all__ = ["code_fingerprint", "code_identity"]
