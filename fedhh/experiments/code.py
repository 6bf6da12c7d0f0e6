"""The code a run is computed by: ``code_fingerprint``, a digest of the fedhh package's sources
and data (codebooks) and of the versions of the libraries its results depend on
(``RESULT_LIBRARIES``: numpy's random streams, scipy's and dp-accounting's calibrations, the
word lists of the built-in datasets), which tells a changed simulator apart even under one
version number. Dask workers must run the client's (fedhh.experiments.cluster), and every
stored run and report records the code that made it (``code_identity``).

The fingerprint is taken once, when this module is first imported (with the rest of fedhh's
experiments code, before any run), and stands for the code this process runs: a file of the
package that changes afterwards (an update or a `git checkout` in place under an editable
install) leaves the modules already loaded old, which the fingerprint describes, but a module
imported later, or a codebook read later, would be the new one, a mix that no digest
describes: ``check_unchanged`` (before and after each run) refuses to go on when a changed file
may have reached the code (``changed_files``). (Before, the digest was read on its first use,
possibly long after the modules were loaded, and never again.)"""

from __future__ import annotations

import hashlib
import os
import sys
from importlib import metadata
from pathlib import Path

import fedhh
from fedhh.errors import ConfigError

# The distributions whose version can change a run's numbers: numpy (every random stream: the
# simulator's noise, sampling, selection, the synthetic datasets), scipy and dp-accounting (the
# privacy calibrations: eps_local, sigma, the Laplace scale), wordfreq and pyspellchecker (the
# built-in datasets' word frequencies, the warm-start list). Others (grpc, cryptography, Dask)
# do not touch a simulated run.
RESULT_LIBRARIES = ("numpy", "scipy", "dp-accounting", "wordfreq", "pyspellchecker")

_ROOT = Path(fedhh.__file__).resolve().parent


def _files() -> list[Path]:
    return sorted(p for p in _ROOT.rglob("*") if p.is_file() and p.suffix in (".py", ".json")
                  and "__pycache__" not in p.parts)


def _library_versions() -> dict[str, str]:
    versions = {}
    for name in RESULT_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _state(files: list[Path]) -> dict[str, tuple[int, ...]]:
    """Each file's size, modification and change times and inode, by path relative to the
    package (the modification time alone misses a file rewritten with its old time set back,
    `cp -p`, `rsync -a`; a change time cannot be set back, and a copy is a new inode)."""
    state: dict[str, tuple[int, ...]] = {}
    for path in files:
        try:
            info = path.stat()
        except OSError:  # (removed since it was listed)
            continue
        state[path.relative_to(_ROOT).as_posix()] = (info.st_size, info.st_mtime_ns,
                                                     info.st_ctime_ns, info.st_ino)
    return state


def _fingerprint(files: list[Path], libraries: dict[str, str]) -> str:
    """SHA-256 over the package's files (by path relative to the package, in path order) and
    the library versions."""
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        digest.update(b"%s\0%d\0" % (path.relative_to(_ROOT).as_posix().encode(), len(data)))
        digest.update(data)
    for name, version in sorted(libraries.items()):
        digest.update(f"library\0{name}\0{version}\0".encode())
    return digest.hexdigest()


def _loaded() -> set[str]:
    """The package's source files (relative paths) whose modules this process has loaded."""
    prefix = os.path.dirname(fedhh.__file__) + os.sep  # (as the modules' __file__ spell it)
    loaded = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.startswith(prefix):
            loaded.add(name[len(prefix):].replace(os.sep, "/"))
    return loaded


_SEEN = _loaded()  # (grown by changed_files: the modules seen loaded unchanged)
_LISTED = _files()
_STATE = _state(_LISTED)
_LIBRARIES = _library_versions()
_FINGERPRINT = _fingerprint(_LISTED, _LIBRARIES)


def code_fingerprint() -> str:
    """This process's code: SHA-256 over its fedhh package (every source and data file,
    codebooks included) and the versions of ``RESULT_LIBRARIES``, as they were when fedhh's
    experiments code was loaded."""
    return _FINGERPRINT


def library_versions() -> dict[str, str]:
    """The versions of ``RESULT_LIBRARIES`` this process loaded (part of its fingerprint)."""
    return dict(_LIBRARIES)


def changed_files() -> list[str]:
    """The package's files (relative paths) added, removed or modified since the fingerprint
    was taken that this process's code may hold: a data file (read when needed), or a source
    whose module was loaded since the last look. A module seen loaded with its file unchanged
    runs the code the fingerprint read, whatever its file holds later; one not loaded yet is
    looked at once it is."""
    now = _state(_files())
    changed = {path for path in now.keys() | _STATE.keys() if now.get(path) != _STATE.get(path)}
    new = _loaded() - _SEEN
    flagged = sorted(path for path in changed if not path.endswith(".py") or path in new)
    _SEEN.update(new - changed)
    return flagged


def changed_on_disk() -> list[str]:
    """Every file of the package (relative paths) added, removed or modified on disk since the
    fingerprint was taken, loaded or not: a long-running process (a Dask worker) whose files
    were updated under it runs the old code, the fingerprint's, and a new process would run
    the new (unlike ``changed_files``, this changes nothing in what it looks at later)."""
    now = _state(_files())
    return sorted(path for path in now.keys() | _STATE.keys() if now.get(path) != _STATE.get(path))


def check_unchanged(who: str = "this process", remedy: str = "") -> None:
    """ConfigError when fedhh's files changed on disk since ``who`` loaded them (its runs
    would be computed by a mix of the two codes and recorded under the old one's digest);
    ``remedy``: what to do, said last."""
    changed = changed_files()
    if not changed:
        return
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    raise ConfigError(
        f"fedhh's files changed on disk since {who} loaded fedhh ({shown}, under {_ROOT}: an "
        "update or a checkout in place): a run computed now would mix the old code, already "
        "loaded, with the new, and be recorded as the old"
        + (f"; {remedy}" if remedy else ""))


def code_identity() -> dict[str, object]:
    """This process's code: the fedhh version, ``code_fingerprint`` and the library versions
    it covers."""
    return {"fedhh": fedhh.__version__, "digest": _FINGERPRINT, "libraries": library_versions()}


__all__ = ["RESULT_LIBRARIES", "changed_files", "changed_on_disk", "check_unchanged",
           "code_fingerprint", "code_identity", "library_versions"]
