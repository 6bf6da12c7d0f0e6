"""A round's domain as points of GF(q)^d, and the size of a report.

The round's domain is the prefix list times every completion of the segment: element
w = h 2^s + t stands for prefix number h (0 <= h < |P|, in the order of the round's prefix
list) followed by the s-bit completion t (0 <= t < 2^s); there are |P| 2^s elements, the same
elements and order as one-hot + randomized response uses (``RoundQuery.domain_index``).

Embedding (the appendix's "Speedups ... for prefix based algorithms"): the domain is
P x GF(q), mapped into GF(q)^d, the first d - 1 coordinates of w the base-q digits of h (least
significant first), the last the field element whose code is t (q > 2^s). Distinct elements
are distinct points, which is all the pairwise independence of affine functions needs
(Algorithm 3).

Nothing to report. The paper's devices with no eligible item report a special element, bottom
(the all-zeros vector of one-hot + randomized response). Here bottom is one more prefix
number, |P|, with completion 0: the prefix list extended by bottom has |P| + 1 entries, so
d - 1 = ceil(log_q(|P| + 1)) (the appendix's ceil(log_q |P|) for that list; one coordinate
more than for |P| alone only when |P| is a power of q, e.g. the first round's single prefix).
The decoders only count the |P| 2^s points of the domain, so bottom is never counted, and it
lies on no line of the domain: for x = bottom and two completions w, w' of one prefix, w - x
and w' - x are linearly independent, so v(w) and v(w') are independent given v(x). A device
*inside* prefix h is on the line of h's completions, and its report's values there are
dependent (for v_d = 0 they are all equal): that correlation between the counts of one
prefix's completions is PI-RAPPOR's (pairwise, not 3-wise, independence) and is described in
docs/pi-rappor.md; bottom placed on a line would add every idle device to it.

A report is v = (v_0, v_1, ..., v_d) in GF(q)^(d+1), v(w) = v_0 + sum_j v_j w_j; sent as the
integer sum_j v_j q^j, it takes ceil((d + 1) log2 q) bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fedhh.errors import ConfigError


@dataclass(frozen=True)
class RoundLayout:
    """The domain of a round with ``prefixes`` prefixes and ``segment_bits``-bit segments,
    embedded in GF(q)^d."""

    q: int
    prefixes: int
    segment_bits: int

    def __post_init__(self) -> None:
        if self.prefixes < 1:
            raise ConfigError(f"a round needs at least one prefix, got {self.prefixes}")
        if not self.segment_bits >= 1 or (1 << self.segment_bits) >= self.q:
            raise ConfigError(f"a {self.segment_bits}-bit segment needs q > 2^segment, got "
                              f"q = {self.q}")

    @cached_property
    def prefix_digits(self) -> int:
        """d - 1 = ceil(log_q(|P| + 1)): the coordinates that hold the prefix number (bottom's
        included)."""
        digits, capacity = 0, 1
        while capacity <= self.prefixes:
            digits += 1
            capacity *= self.q
        return digits

    @property
    def dimension(self) -> int:
        """d: coordinates of a domain point."""
        return self.prefix_digits + 1

    @property
    def report_length(self) -> int:
        """d + 1 field elements per report."""
        return self.dimension + 1

    @property
    def completions(self) -> int:
        return 1 << self.segment_bits

    @property
    def size(self) -> int:
        """|P| 2^s elements."""
        return self.prefixes << self.segment_bits

    @property
    def nothing(self) -> int:
        """The prefix number of the "nothing to report" point (its completion is 0)."""
        return self.prefixes

    @property
    def report_bits(self) -> int:
        """ceil((d + 1) log2 q): the bits of a report sent as one integer below q^(d+1)."""
        return (self.q**self.report_length - 1).bit_length()

    @property
    def report_bytes(self) -> int:
        return (self.report_bits + 7) // 8

    @cached_property
    def prefix_points(self) -> np.ndarray:
        """(|P|, d - 1) int64: the base-q digits of every prefix number."""
        h = np.arange(self.prefixes, dtype=np.int64)
        powers = self.q ** np.arange(self.prefix_digits, dtype=np.int64)
        return (h[:, None] // powers) % self.q

    def points(self, indices: np.ndarray) -> np.ndarray:
        """(n, d) int64 coordinates of domain elements; -1 is "nothing to report"."""
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < -1 or indices.max() >= self.size):
            bad = indices[(indices < -1) | (indices >= self.size)][0]
            raise ConfigError(f"domain index {bad} is outside the round's domain [0, "
                              f"{self.size}) (or -1 for nothing to report)")
        nothing = indices < 0
        h = np.where(nothing, self.nothing, indices >> self.segment_bits)
        t = np.where(nothing, 0, indices & (self.completions - 1))
        powers = self.q ** np.arange(self.prefix_digits, dtype=np.int64)
        digits = (h[:, None] // powers) % self.q
        return np.concatenate([digits, t[:, None]], axis=1)
