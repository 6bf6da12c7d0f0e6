"""fedhh: private federated heavy-hitter discovery (OptPrefixTree).

The library is pure Python and numpy: no network stack is imported here.
"""

__version__ = "0.1.0"
