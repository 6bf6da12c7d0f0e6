"""Item codecs: any Unicode string to a bit string of at most ``max_bits`` bits, and back.

- ``fedhh.codec.codebook``: prefix-free codes over UTF-8 bytes with an end symbol and an
  escape (built-in, trained from a public sample, or loaded from JSON);
- ``fedhh.codec.codec``: ``Codec`` (encode, decode, display) for one codebook and ``max_bits``;
- ``fedhh.codec.automaton``: which prefixes an honest device can hold (exactly);
- ``fedhh.codec.codes``: arrays of codes of any width (uint64 up to 64 bits).

See docs/codecs.md.
"""

from fedhh.codec.codebook import (
    BUILTIN_NAMES,
    DEFAULT_CODEBOOK,
    Codebook,
    codebook_from_spec,
    codec_spec,
    train_codebook,
)
from fedhh.codec.codec import ELLIPSIS, MAX_SUPPORTED_BITS, Codec, Decoded, ItemCodes

CODEC_NAMES = BUILTIN_NAMES

__all__ = [
    "BUILTIN_NAMES",
    "CODEC_NAMES",
    "DEFAULT_CODEBOOK",
    "ELLIPSIS",
    "MAX_SUPPORTED_BITS",
    "Codebook",
    "Codec",
    "Decoded",
    "ItemCodes",
    "codebook_from_spec",
    "codec_spec",
    "train_codebook",
]
