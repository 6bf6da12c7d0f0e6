"""`fedhh up --workdir` (and a load test's) a folder that cannot be made is refused naming the
workdir and what to do. Before, the bare OSError reached the user: "fedhh up: error: Not a
directory: /tmp/afile/sub", naming neither the option nor the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.topology import LocalTopology


def test_a_workdir_under_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("kept\n")
    with pytest.raises(ConfigError, match=r"^workdir \S+/afile/sub cannot be made: Not a "
                                          r"directory; give a folder"):
        LocalTopology(tmp_path / "afile" / "sub", tls=False)
    assert (tmp_path / "afile").read_text() == "kept\n"
