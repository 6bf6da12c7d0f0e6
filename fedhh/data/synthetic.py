"""synthetic-reddit: a synthetic population calibrated to the paper's Reddit statistics.

The paper evaluates on LEAF Reddit (1.6 million users; on average 1092 words and 379 distinct
words per user). We cannot ship that data, so we draw a population with the same shape from a
real English word distribution (`fedhh.data.lexicon`): wordfreq's English list plus a rare tail of
typos, elongations, handles, hashtags, numbers, run-together words and domains.

Model of one user (all per-user quantities independent across users):

1. Length: ``L ~ LogNormal(mu, sigma)`` tokens, rounded and clipped to ``[min_tokens,
   max_tokens]`` (heavy-tailed: a few prolific users, many light ones).
2. Mixture weights over four sources: background English, the user's topics, the user's pet words
   and the rare tail. Topic, pet and tail weights are the shape's means times Gamma factors
   (so some users are very topical or very sloppy); background takes the rest.
3. Background tokens: the ``head_size`` most frequent words get multinomial counts directly; the
   other background tokens, and all tokens of the other sources, come in bursts: a draw of a word
   is repeated ``Geometric(1/burst)`` times (within-user repetition, as real authors repeat the
   words they care about).
4. Topics ("subreddits"): each user follows 1 + Poisson(``extra_topics``) of ``num_topics``
   topics, chosen by Zipf popularity. A topic is ``topic_size`` content words drawn by frequency
   to the power ``topic_tilt``, with Zipf weights inside the topic.
5. Pet words: ``5 + Poisson(pet_words)`` words per user, drawn by frequency to the power
   ``pet_tilt`` (rarer, personal words), each used with equal chance.

Generation is shard-parallel: users are cut in shards of `SHARD_USERS`; shard ``k`` draws from
``SeedSequence(seed, spawn_key=(1, k))``, so the result does not depend on the number of worker
processes, and the first ``n`` users of a larger population are the population of ``n`` users
(when ``n`` is a multiple of the shard size). Shared tables come from ``spawn_key=(0,)``.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import multiprocessing.pool
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.data.builder import assemble_shards, assembly_steps
from fedhh.data.lexicon import TAIL_KINDS, WeightedStrings, english_lexicon, rare_tail
from fedhh.data.progress import Meter
from fedhh.data.scratch import hold_signals, release_signals, scratch_path

logger = logging.getLogger(__name__)

GENERATOR_VERSION = 1
SHARD_USERS = 10_000
PAPER_USERS = 1_600_000


@dataclass(frozen=True)
class SyntheticShape:
    """The calibrated distributional shape (see the module docstring for each knob)."""

    mean_tokens: float = 1092.0
    sigma: float = 1.1
    min_tokens: int = 20
    max_tokens: int = 40_000
    head_size: int = 256
    topic_weight: float = 0.16
    pet_weight: float = 0.06
    tail_weight: float = 0.025
    burst_background: float = 1.76
    burst_topic: float = 2.5
    burst_pet: float = 3.0
    burst_tail: float = 1.4
    num_topics: int = 1000
    topic_size: int = 2000
    topic_tilt: float = 0.6
    extra_topics: float = 1.0
    pet_words: float = 15.0
    pet_tilt: float = 0.5
    tail_strings: int = 1_000_000


@dataclass
class _Alias:
    """Walker's alias table: draw j uniformly, keep it with prob[j], else take alias[j]."""

    prob: np.ndarray
    alias: np.ndarray
    ids: np.ndarray

    @staticmethod
    def build(weights: np.ndarray, ids: np.ndarray) -> _Alias:
        n = weights.size
        scaled = weights / weights.sum() * n
        prob = np.ones(n)
        alias = np.arange(n, dtype=np.int64)
        small = [i for i in range(n) if scaled[i] < 1.0]
        large = [i for i in range(n) if scaled[i] >= 1.0]
        while small and large:
            s = small.pop()
            g = large[-1]
            prob[s] = scaled[s]
            alias[s] = g
            scaled[g] -= 1.0 - scaled[s]
            if scaled[g] < 1.0:
                large.pop()
                small.append(g)
        return _Alias(prob, alias, ids.astype(np.int32))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        u = rng.random(size) * self.prob.size
        j = u.astype(np.int64)
        np.minimum(j, self.prob.size - 1, out=j)
        keep = (u - j) < self.prob[j]
        return self.ids[np.where(keep, j, self.alias[j])]


@dataclass
class Tables:
    """Everything a shard worker needs (built once, shipped to every worker)."""

    shape: SyntheticShape
    vocab_size: int
    head_ids: np.ndarray
    head_p: np.ndarray
    head_mass: float
    background: _Alias
    pets: _Alias
    tail: _Alias
    topic_popularity: np.ndarray
    topic_words: np.ndarray  # int32[num_topics, topic_size], vocabulary ids
    topic_cdf: np.ndarray  # float64[topic_size], the within-topic Zipf CDF (shared)


LEXICON_STEPS = 1 + TAIL_KINDS


def build_lexicon(seed: int, shape: SyntheticShape, meter: Meter | None = None
                  ) -> tuple[WeightedStrings, WeightedStrings]:
    """The English lexicon and its rare tail; ``meter`` advances by `LEXICON_STEPS`."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    english = english_lexicon(rng)
    if meter is not None:
        meter.update()
    tail = rare_tail(english, rng, shape.tail_strings,
                     on_kind=None if meter is None else meter.update)
    return english, tail


def build_tables(
    english: WeightedStrings, tail: WeightedStrings, seed: int, shape: SyntheticShape
) -> Tables:
    """The sampling tables over the global id space: english ids, then tail ids."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 1)))
    n_en = len(english.strings)
    p = english.weights / english.weights.sum()
    h = shape.head_size
    head_ids = np.arange(h, dtype=np.int64)
    head_mass = float(p[:h].sum())
    rest_ids = np.arange(h, n_en, dtype=np.int64)
    background = _Alias.build(p[h:], rest_ids)
    pet_w = p[h:] ** shape.pet_tilt
    pets = _Alias.build(pet_w, rest_ids)
    tail_alias = _Alias.build(tail.weights, np.arange(n_en, n_en + len(tail.strings)))
    # Topic word sets: Gumbel-top-k sampling without replacement from the content words.
    pool = min(150_000, n_en - h)
    logw = shape.topic_tilt * np.log(p[h : h + pool])
    topic_words = np.empty((shape.num_topics, shape.topic_size), dtype=np.int32)
    for t in range(shape.num_topics):
        keys = logw + rng.gumbel(size=pool)
        top = np.argpartition(-keys, shape.topic_size)[: shape.topic_size]
        top = top[np.argsort(-keys[top])]
        topic_words[t] = top + h
    zipf = 1.0 / (np.arange(shape.topic_size) + 3.0) ** 1.05
    popularity = 1.0 / np.arange(1, shape.num_topics + 1) ** 0.9
    return Tables(
        shape=shape,
        vocab_size=n_en + len(tail.strings),
        head_ids=head_ids,
        head_p=p[:h] / head_mass,
        head_mass=head_mass,
        background=background,
        pets=pets,
        tail=tail_alias,
        topic_popularity=np.cumsum(popularity / popularity.sum()),
        topic_words=topic_words,
        topic_cdf=np.cumsum(zipf / zipf.sum()),
    )


TABLE_STEPS = LEXICON_STEPS + 1
_TABLES: dict[tuple[int, SyntheticShape], tuple[WeightedStrings, WeightedStrings, Tables]] = {}


def cached_tables(seed: int, shape: SyntheticShape, meter: Meter | None = None
                  ) -> tuple[WeightedStrings, WeightedStrings, Tables]:
    """Lexicon and tables for (seed, shape), kept for the next call in this process (one
    entry); ``meter`` advances by `TABLE_STEPS` when they are built."""
    key = (seed, shape)
    if key not in _TABLES:
        english, tail = build_lexicon(seed, shape, meter)
        tables = build_tables(english, tail, seed, shape)
        if meter is not None:
            meter.update()
        _TABLES.clear()
        _TABLES[key] = english, tail, tables
    return _TABLES[key]


def lognormal_mu(shape: SyntheticShape) -> float:
    """mu such that the clipped LogNormal(mu, sigma) has mean ``shape.mean_tokens``."""
    from scipy import optimize, stats

    s = shape.sigma
    lo, hi = float(shape.min_tokens), float(shape.max_tokens)

    def clipped_mean(mu: float) -> float:
        dist = stats.lognorm(s, scale=math.exp(mu))
        za, zb = (math.log(lo) - mu) / s, (math.log(hi) - mu) / s
        middle = math.exp(mu + s * s / 2) * (stats.norm.cdf(zb - s) - stats.norm.cdf(za - s))
        return float(lo * dist.cdf(lo) + middle + hi * dist.sf(hi))

    return float(optimize.brentq(lambda mu: clipped_mean(mu) - shape.mean_tokens, 0.0, 12.0))


def _bursts(rng: np.random.Generator, tokens: np.ndarray, burst: float) -> tuple[np.ndarray,
                                                                                   np.ndarray]:
    """Per user, enough bursts to cover ``tokens``: (owner per burst, burst sizes)."""
    # Stochastic rounding keeps the expected token count exact: E[draws] * burst == tokens.
    draws = np.floor(tokens / burst + rng.random(tokens.size)).astype(np.int64)
    owner = np.repeat(np.arange(tokens.size, dtype=np.int64), draws)
    sizes = np.minimum(rng.geometric(1.0 / burst, size=owner.size), 255)
    return owner, sizes


def generate_shard(tables: Tables, seed: int, shard: int, users: int, out: Path) -> dict[str, Any]:
    """Draw ``users`` users of shard ``shard`` and write them (global ids) to ``out``."""
    sh = tables.shape
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, shard)))
    mu = _MU_CACHE.setdefault(sh, lognormal_mu(sh))
    length = np.clip(np.rint(rng.lognormal(mu, sh.sigma, size=users)), sh.min_tokens,
                     sh.max_tokens).astype(np.int64)
    w_topic = sh.topic_weight * rng.gamma(2.0, 0.5, size=users)
    w_pet = sh.pet_weight * rng.gamma(2.0, 0.5, size=users)
    w_tail = sh.tail_weight * rng.gamma(0.7, 1 / 0.7, size=users)
    side = w_topic + w_pet + w_tail
    squeeze = np.where(side > 0.8, 0.8 / side, 1.0)
    w_topic, w_pet, w_tail = w_topic * squeeze, w_pet * squeeze, w_tail * squeeze
    n_topic = rng.binomial(length, w_topic)
    left = length - n_topic
    n_pet = rng.binomial(left, np.minimum(w_pet / (1 - w_topic), 1.0))
    left -= n_pet
    n_tail = rng.binomial(left, np.minimum(w_tail / (1 - w_topic - w_pet), 1.0))
    n_bg = left - n_tail
    n_head = rng.binomial(n_bg, tables.head_mass)
    head_counts = rng.multinomial(n_head, tables.head_p)

    owners: list[np.ndarray] = []
    words: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    owner, size = _bursts(rng, n_bg - n_head, sh.burst_background)
    owners.append(owner)
    sizes.append(size)
    words.append(tables.background.draw(rng, owner.size))

    owner, size = _bursts(rng, n_tail, sh.burst_tail)
    owners.append(owner)
    sizes.append(size)
    words.append(tables.tail.draw(rng, owner.size))

    # Topics: each user follows 1 + Poisson(extra) topics with Dirichlet(1) shares.
    k = 1 + np.minimum(rng.poisson(sh.extra_topics, size=users), 4)
    follow_owner = np.repeat(np.arange(users), k)
    follow = np.searchsorted(tables.topic_popularity, rng.random(follow_owner.size))
    follow = np.minimum(follow, sh.num_topics - 1)
    share = rng.exponential(size=follow_owner.size)
    starts = np.concatenate([[0], np.cumsum(k)])
    share /= np.repeat(np.add.reduceat(share, starts[:-1]), k)
    cum = np.cumsum(share)
    base = cum[starts[:-1]] - share[starts[:-1]]  # per user: cum just before its first follow
    owner, size = _bursts(rng, n_topic, sh.burst_topic)
    choice = np.searchsorted(cum, base[owner] + rng.random(owner.size), side="right")
    choice = np.clip(choice, starts[owner], starts[owner + 1] - 1)
    rank = np.searchsorted(tables.topic_cdf, rng.random(owner.size))
    rank = np.minimum(rank, sh.topic_size - 1)
    owners.append(owner)
    sizes.append(size)
    words.append(tables.topic_words[follow[choice], rank])

    # Pet words: 5 + Poisson(pet_words) per user, used uniformly.
    npet = 5 + rng.poisson(sh.pet_words, size=users)
    pet_start = np.concatenate([[0], np.cumsum(npet)])
    pet_ids = tables.pets.draw(rng, int(pet_start[-1]))
    owner, size = _bursts(rng, n_pet, sh.burst_pet)
    slot = pet_start[owner] + (rng.random(owner.size) * npet[owner]).astype(np.int64)
    owners.append(owner)
    sizes.append(size)
    words.append(pet_ids[slot])

    owner = np.concatenate(owners)
    word = np.concatenate(words).astype(np.int64)
    size = np.concatenate(sizes).astype(np.int64)
    del owners, words, sizes
    vocab = tables.vocab_size
    keys = ((owner * vocab + word) << 8) | size
    del owner, word, size
    keys.sort()
    pair = keys >> 8
    first = np.flatnonzero(np.concatenate([[True], pair[1:] != pair[:-1]]))
    burst_counts = np.add.reduceat(keys & 0xFF, first) if first.size else first
    pair = pair[first]
    b_owner = pair // vocab
    b_word = pair % vocab
    del keys

    h_owner, h_word = np.nonzero(head_counts)
    h_count = head_counts[h_owner, h_word]
    h_len = np.bincount(h_owner, minlength=users)
    b_len = np.bincount(b_owner, minlength=users)
    lengths = h_len + b_len
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    total = int(indptr[-1])
    items = np.empty(total, dtype=np.int32)
    counts = np.empty(total, dtype=np.int64)
    h_pos = indptr[h_owner] + (np.arange(h_owner.size) - np.repeat(
        np.concatenate([[0], np.cumsum(h_len)])[:-1], h_len))
    b_pos = indptr[b_owner] + h_len[b_owner] + (np.arange(b_owner.size) - np.repeat(
        np.concatenate([[0], np.cumsum(b_len)])[:-1], b_len))
    items[h_pos] = tables.head_ids[h_word]
    counts[h_pos] = h_count
    items[b_pos] = b_word
    counts[b_pos] = burst_counts
    if counts.size and int(counts.max()) > 0xFFFF:
        raise OverflowError(f"shard {shard}: a count of {int(counts.max())} exceeds uint16")
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "lengths.npy", lengths.astype(np.int64))
    np.save(out / "items.npy", items)
    np.save(out / "counts.npy", counts.astype(np.uint16))
    tokens = np.bincount(np.repeat(np.arange(users), lengths), weights=counts, minlength=users)
    tail_first = vocab - tables.tail.ids.size
    return {
        "users": users,
        "entries": total,
        "tokens": int(tokens.sum()),
        "tail_tokens": int(counts[items >= tail_first].sum()),
        "used": np.packbits(np.bincount(items, minlength=vocab) > 0),
    }


_MU_CACHE: dict[SyntheticShape, float] = {}
_WORKER_TABLES: Tables | None = None


def _set_tables(tables: Tables) -> None:
    global _WORKER_TABLES
    _WORKER_TABLES = tables


def _init_worker(tables: Tables, mask: frozenset[int] | None) -> None:
    """A pool worker's start. Only there: this process's own handlers stay as they are."""
    _set_tables(tables)
    # A forked worker inherits the CLI's handlers (``fedhh.cli.main``: SIGTERM as Ctrl-C).
    # Ctrl-C, and SIGTERM to the process group (`kill -TERM -PGID`, systemd, `timeout`), reach
    # every worker too: only the caller acts on them, and its pool kills the workers (`_Pool`).
    # (Before, SIGTERM's default ended a worker, and one waiting for a task died holding the
    # pool's task-queue lock: the caller's terminate waited for that lock for ever, 3 times in
    # 39 group SIGTERMs as the workers started. Ctrl-C printed a KeyboardInterrupt traceback.)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # It was started with both blocked (`hold_signals`, in the caller); ignored now, a signal
    # held meanwhile is dropped here.
    release_signals(mask)


class _Pool(multiprocessing.pool.Pool):
    """A pool whose terminate (on the way out of its ``with``, however it ends) kills its
    workers: they ignore SIGTERM (`_init_worker`). It does so once it holds the task-queue lock
    and has stopped replacing workers, as Pool's terminate does."""

    @staticmethod
    def Process(ctx: Any, *args: Any, **kwds: Any) -> Any:  # (Pool's name for it)
        return _KILLED_BY_TERMINATE[ctx.get_start_method()](*args, **kwds)


class _SpawnWorker(multiprocessing.context.SpawnProcess):
    def terminate(self) -> None:
        self.kill()


_KILLED_BY_TERMINATE: dict[str, type[multiprocessing.process.BaseProcess]] = {
    "spawn": _SpawnWorker}
if sys.platform != "win32":
    class _ForkWorker(multiprocessing.context.ForkProcess):
        def terminate(self) -> None:
            self.kill()

    _KILLED_BY_TERMINATE["fork"] = _ForkWorker


def _run_shard(job: tuple[int, int, int, str]) -> dict[str, Any]:
    seed, shard, users, out = job
    if _WORKER_TABLES is None:
        raise RuntimeError("worker tables not initialised")
    return generate_shard(_WORKER_TABLES, seed, shard, users, Path(out))


def generate_synthetic(
    target: str | os.PathLike[str],
    *,
    num_users: int = PAPER_USERS,
    seed: int = 0,
    shape: SyntheticShape | None = None,
    workers: int | None = None,
    name: str = "synthetic-reddit",
    progress: bool = False,
    shard_users: int = SHARD_USERS,
) -> Path:
    """Generate the synthetic population into the dataset directory ``target`` (atomically).

    ``workers`` processes (default ``min(2, cores)``) each draw whole shards of ``shard_users``
    users; the result is the same for any number of workers.
    """
    if num_users < 1:
        raise ValueError(f"num_users must be >= 1, got {num_users}")
    if shard_users < 1:
        raise ValueError(f"shard_users must be >= 1, got {shard_users}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    shape = shape or SyntheticShape()
    workers = workers or min(2, os.cpu_count() or 1)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    started = time.perf_counter()
    out = Path(target)
    with Meter(progress, f"{name}: word tables", TABLE_STEPS, "step") as meter:
        english, tail, tables = cached_tables(seed, shape, meter)
    vocabulary = english.strings + tail.strings
    logger.info("tables built in %.1f s", time.perf_counter() - started)
    n_shards = math.ceil(num_users / shard_users)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Named before it exists and made inside the try (`fedhh.data.scratch`: before, mkdtemp made
    # it before the try, and a Ctrl-C or SIGTERM in between, in mkdtemp's return or while the
    # jobs were listed, left it behind).
    scratch = scratch_path(out.parent, ".gen-")
    jobs = [
        (seed, k, min(shard_users, num_users - k * shard_users), str(scratch / f"shard-{k:06d}"))
        for k in range(n_shards)
    ]
    results: list[dict[str, Any]] = []
    try:
        scratch.mkdir(mode=0o700)
        if workers == 1 or n_shards == 1:
            # (not _init_worker: here, in the caller's process, SIGTERM's default killed a
            # `fedhh experiments` or `data` that had built a one-shard dataset, exit 143 with
            # no line and nothing cancelled, instead of taking it as Ctrl-C)
            _set_tables(tables)
            with Meter(progress, f"{name}: users", num_users, " users",
                       unit_scale=True) as meter:
                for job in jobs:
                    results.append(_run_shard(job))
                    meter.update(job[2])
        else:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            # The pool forks its workers before the meter starts its drawing thread, with Ctrl-C
            # and SIGTERM held: one handled inside os.fork (its at-fork callbacks) was printed
            # as "Exception ignored" and lost, and the build went on to the end (exit 0); one
            # in Pool() left the workers it had started running. Held, it is raised once the
            # pool is bound, and the with terminates the pool.
            held = hold_signals()
            try:
                pool = _Pool(workers, _init_worker, (tables, held), context=ctx)
            except BaseException:
                release_signals(held)
                raise
            with pool:
                release_signals(held)
                with Meter(progress, f"{name}: users", num_users, " users",
                           unit_scale=True) as meter:
                    for result in pool.imap(_run_shard, jobs):
                        results.append(result)
                        meter.update(result["users"])
        used = np.zeros(tables.vocab_size, dtype=bool)
        for r in results:
            used |= np.unpackbits(r["used"], count=tables.vocab_size).astype(bool)
        tokens = sum(r["tokens"] for r in results)
        tail_tokens = sum(r["tail_tokens"] for r in results)
        gen_seconds = time.perf_counter() - started
        stats = {
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
            "shape": asdict(shape),
            "tokens": tokens,
            "tail_token_share": tail_tokens / max(tokens, 1),
            "tail_vocabulary": int(used[len(english.strings):].sum()),
            "generation_seconds": round(gen_seconds, 1),
            "workers": workers,
        }
        shards = [Path(j[3]) for j in jobs]
        with Meter(progress, f"{name}: writing", assembly_steps(len(shards), True),
                   "step") as meter:
            assemble_shards(
                out, shards, vocabulary, name=name,
                provenance=_provenance(seed, num_users), stats=stats, num_users=num_users,
                drop_unused=True, meter=meter,
            )
            shutil.rmtree(scratch, ignore_errors=True)  # gigabytes: part of the step
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("generated %s (%d users) in %.1f s", out, num_users,
                time.perf_counter() - started)
    return out


def _provenance(seed: int, num_users: int) -> str:
    return (
        f"synthetic-reddit generator v{GENERATOR_VERSION}, seed {seed}, {num_users} users: "
        "words from wordfreq 3.x 'large' English list (ASCII, numbers expanded) plus a generated "
        "rare tail; per-user topics, pet words and bursts calibrated to LEAF Reddit "
        "(1092 words, 379 distinct words per user)"
    )
