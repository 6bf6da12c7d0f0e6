#!/usr/bin/env python3
"""Generate the checked-in TypeScript message code for proto/fedhh/v1/*.proto into src/gen/.

    python clients/web/generate_proto.py          # regenerate
    python clients/web/generate_proto.py --check  # exit 1 if the checked-in code differs (drift)

protoc is the one proto/generate.py uses (grpcio-tools, pinned in pyproject's test extra), so
both languages' code comes from the same parser; the plugin is @bufbuild/protoc-gen-es, pinned
in package.json (run `npm ci` here first). Messages only: the gRPC-Web/Connect client is still
to come (docs/web-devices.md).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

WEB = Path(__file__).resolve().parent
ROOT = WEB.parents[1]
PROTO_ROOT = ROOT / "proto"
TARGET = WEB / "src" / "gen"
PLUGIN = WEB / "node_modules" / ".bin" / "protoc-gen-es"


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc  # imported here: only this tool needs grpcio-tools

    if not PLUGIN.exists():
        raise SystemExit(f"{PLUGIN} is missing: run `npm ci` in {WEB}")
    sources = sorted((PROTO_ROOT / "fedhh" / "v1").glob("*.proto"))
    args = ["protoc", f"-I{PROTO_ROOT}", f"--plugin=protoc-gen-es={PLUGIN}", f"--es_out={out}",
            # TypeScript sources with .js import suffixes, as the rest of src/ (NodeNext).
            "--es_opt=target=ts,import_extension=js",
            *(str(s.relative_to(PROTO_ROOT)) for s in sources)]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out) for p in out.rglob("*.ts"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if checked-in code drifted")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        produced = generate(out)
        if args.check:
            checked_in = sorted(p.relative_to(TARGET) for p in TARGET.rglob("*.ts"))
            drift = sorted(set(map(str, checked_in)) ^ set(map(str, produced)))
            drift += [str(p) for p in produced if (TARGET / p).exists()
                      and not filecmp.cmp(out / p, TARGET / p, shallow=False)]
            if drift:
                print("generated code differs from proto/: " + ", ".join(drift)
                      + " (run python clients/web/generate_proto.py)", file=sys.stderr)
                return 1
            return 0
        if TARGET.exists():
            shutil.rmtree(TARGET)
        for path in produced:
            (TARGET / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out / path, TARGET / path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
