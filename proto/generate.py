#!/usr/bin/env python3
"""Generate the checked-in Python code for proto/fedhh/v1/*.proto into fedhh/v1/.

    python proto/generate.py          # regenerate
    python proto/generate.py --check  # exit 1 if the checked-in code differs (drift)

Uses grpcio-tools (pinned in pyproject's test extra) so the generated code never needs a newer
protobuf runtime than the project allows.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
PACKAGE = Path("fedhh") / "v1"


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc  # imported here: only this tool needs grpcio-tools

    sources = sorted((PROTO_ROOT / PACKAGE).glob("*.proto"))
    if not sources:
        raise SystemExit(f"no .proto files under {PROTO_ROOT / PACKAGE}")
    include = Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}",
            f"--pyi_out={out}", f"--grpc_python_out={out}",
            *(str(s.relative_to(PROTO_ROOT)) for s in sources)]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out / PACKAGE).glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if checked-in code drifted")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        produced = generate(Path(tmp))
        target = ROOT / PACKAGE
        if args.check:
            checked_in = sorted(target.glob("*_pb2*.py*"))
            names = {p.name for p in produced}
            drift = [p.name for p in checked_in if p.name not in names]
            drift += [p.name for p in produced
                      if not (target / p.name).exists()
                      or not filecmp.cmp(p, target / p.name, shallow=False)]
            if drift:
                print("generated code differs from proto/: " + ", ".join(sorted(drift))
                      + " (run python proto/generate.py)", file=sys.stderr)
                return 1
            return 0
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.glob("*_pb2*.py*"):
            stale.unlink()
        for path in produced:
            shutil.copy2(path, target / path.name)
        init = target / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated gRPC code for proto/fedhh/v1 (do not edit)."""\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
