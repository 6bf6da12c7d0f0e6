"""The items of a dataset longer than a run's codes, which a run finds only cut, as the prefix
of every item starting so (docs/codecs.md, "How long an item can be"): `fedhh data inspect`
names those past the codes' limit, `fedhh simulate` and `fedhh up` those past the run's own
codes before its first round, and `fedhh device` counts its users' at the start."""

from __future__ import annotations

import bisect
import heapq
from typing import Any

import numpy as np

from fedhh.codec import MAX_SUPPORTED_BITS, Codec
from fedhh.codec import codes as cw
from fedhh.data.dataset import FederatedDataset


def past_codes(vocabulary: tuple[str, ...], codec: Codec) -> np.ndarray:
    """Ids (ascending) of the items whose code is longer than ``codec``'s ``max_bits``. Only an
    item of enough UTF-8 bytes to need that many bits is encoded, each byte costing at most the
    book's longest codeword, or the escape and the byte's 8 bits (a symbol covers a byte or
    more): encoding all of synthetic-reddit's 964,728 items at 4,096 bits took 16 s, picking
    the few long ones first 0.15 s for 1M short items."""
    book = codec.book
    per_byte = max(book.max_codeword, len(book.escape) + 8 if book.escape is not None else 0)
    fits = (codec.max_bits - len(book.end)) // per_byte
    # (a character is at most 4 bytes: a string of fits // 4 characters needs no encoding)
    long = [i for i, item in enumerate(vocabulary)
            if len(item) > fits // 4 and len(item.encode("utf-8")) > fits]
    past = np.array(long, dtype=np.int64)
    if past.size:
        past = past[codec.encode_many([vocabulary[i] for i in long]).truncated]
    return past


def not_denied(ids: np.ndarray, vocabulary: tuple[str, ...], codec: Codec,
               deny_codes: np.ndarray) -> np.ndarray:
    """Those of ``ids`` whose code (cut at ``codec``'s max_bits) is none of ``deny_codes``: a
    device compares codes, so a run never outputs the others."""
    if not ids.size or not deny_codes.size:
        return ids
    denied = set(cw.to_ints(deny_codes))
    codes = cw.to_ints(codec.encode_many([vocabulary[i] for i in ids.tolist()]).codes)
    return ids[[code not in denied for code in codes]]


def past_the_codes(dataset: FederatedDataset, codec: Codec, top: int,
                   users: int | None = None, deny: tuple[str, ...] = ()) -> dict[str, Any]:
    """The items some of the first ``users`` users (all: None) hold that are longer than
    ``codec``'s codes (``past_codes``), less those a run never outputs: whose code is a
    ``deny`` item's (a device compares codes, so a cut deny-list item denies every item cut
    alike, which the deny list's own warning names). ``items``, how many; ``users``, the share
    of those
    users holding one or more; ``heaviest``, the ``top`` most held, each with ``unweighted``
    (its share of the users) and ``needs_bits`` (its whole code's, null past the codes' limit,
    ``MAX_SUPPORTED_BITS``, where no run reaches it)."""
    count = dataset.num_users if users is None else min(users, dataset.num_users)
    found: dict[str, Any] = {"codec": codec.spec, "bits": codec.max_bits, "items": 0,
                             "users": 0.0, "heaviest": []}
    past = past_codes(dataset.vocabulary, codec)
    if deny:
        past = not_denied(past, dataset.vocabulary, codec, codec.encode_many(list(deny)).codes)
    if not past.size or not count:
        return found
    mask = np.zeros(len(dataset.vocabulary), dtype=bool)
    mask[past] = True
    entries = np.asarray(dataset.items[:int(dataset.indptr[count])])
    hits = np.flatnonzero(mask[entries])  # (each user's items are distinct: one entry a holder)
    if not hits.size:
        return found
    holders = np.bincount(entries[hits], minlength=mask.size)
    held = past[holders[past] > 0]
    order = held[np.lexsort((held, -holders[held]))][:top]
    holding = np.unique(np.searchsorted(np.asarray(dataset.indptr), hits, side="right"))
    widest = Codec.from_spec(codec.spec, MAX_SUPPORTED_BITS).encode_many(
        [dataset.vocabulary[i] for i in order.tolist()]) if order.size else None
    found.update(items=int(held.size), users=holding.size / count, heaviest=[
        {"item": dataset.vocabulary[i], "unweighted": int(holders[i]) / count,
         "needs_bits": (None if widest is None or widest.truncated[at]
                        else int(widest.lengths[at]))}
        for at, i in enumerate(order.tolist())])
    return found


STARTING_NAMED = 3  # (the most held of a cut row's items, named in --json)


def starting_so(vocabulary: tuple[str, ...], held: np.ndarray | None,
                prefixes: list[bytes]) -> list[dict[str, Any] | None]:
    """Of each cut row's known bytes (``prefixes``, ``Decoded.known_bytes``' bytes), the
    dataset's items that begin with them: how many (``items``), how many bytes longer than the
    prefix they are (``bytes_more``, the least and the most) and the ``STARTING_NAMED`` most
    held (``held``, the share of users holding each item; else the first in the vocabulary's
    order), whole, their ends too. A run shows such an item by its beginning alone (two URLs
    that differ at their end are one row); a simulation knows the data, and says what the row
    stands for. The vocabulary is sorted by code point, which UTF-8's byte order keeps, so the
    items of one prefix are one span of it. None for a row of no whole byte."""
    encoded = [item.encode("utf-8", "surrogatepass") for item in vocabulary]
    order = list(range(len(encoded)))
    if any(encoded[i] > encoded[i + 1] for i in range(len(encoded) - 1)):
        order.sort(key=encoded.__getitem__)  # (a dataset folder written otherwise)
    keys = [encoded[i] for i in order]
    out: list[dict[str, Any] | None] = []
    for prefix in prefixes:
        if not prefix:  # (a row of bits alone, ⟨0110⟩…: it begins every item)
            out.append(None)
            continue
        lo = bisect.bisect_left(keys, prefix)
        hi = lo
        while hi < len(keys) and keys[hi].startswith(prefix):
            hi += 1
        ids = order[lo:hi]
        # (the few named by a partial sort: a short prefix begins much of a vocabulary)
        named = (heapq.nsmallest(STARTING_NAMED, ids, key=lambda i: (-float(held[i]), i))
                 if held is not None else ids[:STARTING_NAMED])
        more = [len(encoded[i]) - len(prefix) for i in ids]
        out.append({"items": len(ids), "bytes_more": [min(more), max(more)] if more else None,
                    "most_held" if held is not None else "first": [
                        vocabulary[i] for i in named]})
    return out
