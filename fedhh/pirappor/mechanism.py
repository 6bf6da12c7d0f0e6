"""PI-RAPPOR as an OptPrefixTree mechanism: per round, its parameters, randomizer and decoder,
and the thresholding of the decoded counts.

A run fixes eps and the variant (``PiRappor``); each round's segment length fixes the field and
the rates (``at_segment`` -> ``PiRapporRound``, ``params``). The server decodes the round's
reports into counts C_w (``decoders``); C_w has the law of one-hot + randomized response's
coordinate sum with rates a0 = |S| / q and a1 = alpha_1 (Lemma 4.2 of Feldman and Talwar
2021), so estimation and PruneHH are ``fedhh.server.estimate``'s with those rates: the unbiased
estimate (C_w - n a0) / (a1 - a0), the exact binomial or Gaussian zero-count tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedhh.device import RandomSource
from fedhh.errors import ConfigError
from fedhh.pirappor.decoders import AUTO, DECODERS, Decoder, choose, decode
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import PiRapporVariant, RoundParameters, round_parameters
from fedhh.pirappor.randomizer import randomize, randomize_many
from fedhh.server.estimate import BinomialTail, GaussianTail, NullTail, rr_estimate, rr_null_std
from fedhh.server.mechanisms import TailKind, Thresholded, pruned


@dataclass(frozen=True)
class PiRapporRound:
    """PI-RAPPOR in a round with a given segment length."""

    params: RoundParameters
    tail: TailKind = TailKind.BINOMIAL
    decoder: str = AUTO

    def layout(self, prefixes: int) -> RoundLayout:
        return RoundLayout(self.params.q, prefixes, self.params.segment_bits)

    # ---- a device ---------------------------------------------------------------------------
    def randomize(self, layout: RoundLayout, index: int | None,
                  rng: RandomSource | np.random.Generator) -> np.ndarray:
        """A device's report (d + 1 field elements) for its domain element (None: nothing)."""
        return randomize(self.params, layout, index, rng)

    def randomize_many(self, layout: RoundLayout, indices: np.ndarray,
                       rng: RandomSource | np.random.Generator) -> np.ndarray:
        """Independent reports of many devices (-1: nothing to report), for simulation."""
        return randomize_many(self.params, layout, indices, rng)

    # ---- the server -------------------------------------------------------------------------
    def decoder_for(self, layout: RoundLayout, n: int) -> Decoder:
        return choose(self.params, layout, n) if self.decoder == AUTO else Decoder(self.decoder)

    def decode(self, layout: RoundLayout, reports: np.ndarray) -> np.ndarray:
        """C_w for every element of the round's domain."""
        return decode(self.params, layout, reports, self.decoder_for(layout, len(reports)))

    def null_tail(self, n: int) -> NullTail:
        if self.tail is TailKind.BINOMIAL:
            return BinomialTail(n, self.params)
        return GaussianTail(rr_null_std(n, self.params))

    def estimate(self, sums: np.ndarray, n: int) -> np.ndarray:
        """Unbiased count estimates (C_w - n a0) / (a1 - a0)."""
        return rr_estimate(sums, n, self.params)

    def threshold(self, sums: np.ndarray, n: int, fp_ratio: float, tau0: float, eta: float,
                  weights: np.ndarray | None = None) -> Thresholded:
        return pruned(self.estimate(sums, n), n, self.null_tail, fp_ratio, tau0, eta, weights)


@dataclass(frozen=True)
class PiRappor:
    """PI-RAPPOR at local epsilon ``eps_local`` for a whole run (rounds differ by segment)."""

    eps_local: float
    tail: TailKind = TailKind.BINOMIAL
    variant: PiRapporVariant = PiRapporVariant.REPLACEMENT
    decoder: str = AUTO

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS:
            raise ConfigError(f"decoder must be one of {', '.join(DECODERS)}, got "
                              f"{self.decoder!r}")
        round_parameters(self.eps_local, 1, PiRapporVariant(self.variant))  # validates eps

    def at_segment(self, segment_bits: int) -> PiRapporRound:
        params = round_parameters(self.eps_local, segment_bits, PiRapporVariant(self.variant))
        return PiRapporRound(params, self.tail, self.decoder)
