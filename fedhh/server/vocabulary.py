"""The names a run chooses among for the server's round logic: ``fedhh.config`` offers them as
a knob's choices, ``TreeConfig`` and ``plan_segment`` check them. Imports nothing, so the run
configuration reads them without loading the round logic (the package face is lazy)."""

SEGMENT_PLANS = ("greedy", "lookahead", "spread")  # fedhh.server.segment.plan_segment
FP_RATIO_OF = ("kept", "discoveries")  # what the false-positive ratio is relative to
THRESHOLD_WEIGHTS = ("uniform", "parent")  # fedhh.server.evidence
DOMAINS = ("full", "possible")  # a round's domain: every extension, or the possible ones
