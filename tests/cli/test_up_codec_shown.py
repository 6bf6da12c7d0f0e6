"""`fedhh up`'s run line names the codebook a run's items are coded with: a --codec file by the
file and the book's own name, so the operator can tell which of their books the run took."""
import json
from importlib import resources
from pathlib import Path

from fedhh.cli.main import build_parser
from fedhh.cli.up import codec_shown
from fedhh.config.flags import given_text


def _shown(*words: str) -> str:
    args = build_parser("up").parse_args(["up", *words])
    return codec_shown(args.codec, given_text(args, "codec"))


def _book(name: str) -> str:
    book = json.loads(resources.files("fedhh.codec").joinpath("books", "english.json")
                      .read_text(encoding="utf-8"))
    return json.dumps({**book, "name": name})


def test_a_codebook_file_is_named_by_its_path_and_its_name(tmp_path: Path) -> None:
    path = tmp_path / "my book.json"
    path.write_text(_book("shop-urls"), encoding="utf-8")
    assert _shown("--codec", str(path)) == f"the codebook 'shop-urls' of --codec {path}"


def test_an_inline_codebook_is_named_by_its_name() -> None:
    assert _shown("--codec", _book("inline-one")) == \
        "the codebook 'inline-one' of --codec inline JSON"


def test_a_built_in_codebook_is_its_name() -> None:
    assert _shown("--codec", "english") == "english"
