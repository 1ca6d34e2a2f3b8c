"""The two statistics the case studies share: an exact two-sided binomial (sign) test of a paired
comparison, and the Wilson score interval of an accuracy. Lessons 09 (McNemar on the same questions),
11 (a sign test over read subsets) and 12 (McNemar on the same sequences) wrap these; each wrapper
returns what its notebook prints.

Not covered: tests of unpaired samples, multiple-comparison corrections, or intervals of anything
but a proportion.
"""
from __future__ import annotations

import math


def paired_sign_p(wins: int, losses: int) -> float:
    """Two-sided exact p-value that ``wins`` and ``losses`` (the discordant pairs; ties left out) are a
    fair coin's split: ``min(1, 2 * P[Binomial(n, 1/2) <= min(wins, losses)])``, 1 when n = 0. Exact
    integers, so no overflow for large n.

    >>> paired_sign_p(6, 0), paired_sign_p(3, 0), paired_sign_p(0, 0)
    (0.03125, 0.25, 1.0)
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be non-negative, got {wins} and {losses}")
    n, k = wins + losses, min(wins, losses)
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)))


def wilson_interval(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% with z = 1.96) for an accuracy of correct / total.

    >>> [round(v, 3) for v in wilson_interval(30, 40)]
    [0.598, 0.858]
    """
    if total <= 0:
        raise ValueError("total must be positive")
    p = correct / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
