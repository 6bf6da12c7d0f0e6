"""PI-RAPPOR, the OptPrefixTree paper's communication-efficient local randomizer (appendix
"PI-RAPPOR"; Feldman and Talwar 2021, "Lossless Compression of Efficient Private Local
Randomizers", Section 4), for the shuffle model. docs/pi-rappor.md describes it.

- ``field``: GF(q) for prime powers q < 2^31, exact vectorised arithmetic;
- ``params``: a round's q, S and rates (``round_parameters``), exactly eps-DP;
- ``layout``: the round's domain (prefixes x completions) as points of GF(q)^d;
- ``randomizer``: Algorithm 3, a device's report;
- ``decoders``: Algorithms 4 and 5 and the appendix's prefix speed-up, chosen by cost;
- ``mechanism``: ``PiRappor`` for a run, ``PiRapporRound`` for a round (what the simulator and
  the prefix tree use);
- ``accounting``: the shuffle bounds that cover it;
- ``timing``: the study's measurement of the decoders.
"""
