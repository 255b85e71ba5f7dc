"""Gradients of a loss with standardised advantages, split so microbatches can be pooled.

A2C with ``normalize_advantages`` standardises the advantages of the whole *train batch*
of ``N`` rows (mean ``mu``, unbiased std ``sigma``, as ``torch.std``) before the policy
term ``-mean_i[log pi(a_i|s_i) * (A_i - mu) / (sigma + eps)]``. Because that term is
linear in the standardised advantages it splits exactly:

    grad L = grad L_rest + (grad L_A - mu * grad L_1) / (sigma + eps)

with ``L_A = -mean_i[log pi_i * A_i]`` (raw advantages), ``L_1 = -mean_i[log pi_i]`` and
``L_rest`` the value and entropy terms. Each of ``grad L_rest``, ``grad L_A``, ``grad L_1``
is a per-row mean, so the row-weighted average over microbatches of a train batch is the
train batch's own; the advantage moments pool exactly too (Chan et al. 1979, parallel
variance). A microbatch therefore reports these three gradients and its ``(count, mean,
M2)`` of advantages instead of a gradient normalised by its own (biased) statistics, and
``AverageGradients`` forms the whole-train-batch gradient from the pooled parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: added to the std before dividing, as in ``ActorCriticPolicy._normalize``
NORM_EPS = 1e-8


@dataclass(frozen=True)
class AdvantageNormTerms:
    """The split gradient of one batch (see the module docstring).

    Attributes:
        rest: ``grad L_rest`` (value and entropy terms), one float64 array per parameter.
        adv_weighted: ``grad L_A``, per parameter.
        adv_unweighted: ``grad L_1``, per parameter.
        count: rows (env steps) of the batch.
        adv_mean: mean of the raw advantages (float64).
        adv_m2: sum of squared deviations of the raw advantages from ``adv_mean``.
    """

    rest: list[np.ndarray]
    adv_weighted: list[np.ndarray]
    adv_unweighted: list[np.ndarray]
    count: int
    adv_mean: float
    adv_m2: float

    @property
    def adv_std(self) -> float:
        """Unbiased std of the advantages (``torch.std``'s); 0.0 for fewer than 2 rows."""
        if self.count < 2:
            return 0.0
        return float(np.sqrt(self.adv_m2 / (self.count - 1)))

    def gradient(self) -> list[np.ndarray]:
        """``grad L`` with the advantages standardised by this batch's moments.

        Returns:
            one float32 array per parameter. Fewer than 2 rows: advantages are used raw
            (as ``ActorCriticPolicy._normalize`` does).
        """
        out = []
        for r, a, u in zip(self.rest, self.adv_weighted, self.adv_unweighted, strict=True):
            if self.count < 2:
                g = r + a
            else:
                g = r + (a - self.adv_mean * u) / (self.adv_std + NORM_EPS)
            out.append(g.astype(np.float32))
        return out


def pool_terms(terms: Sequence[AdvantageNormTerms]) -> AdvantageNormTerms:
    """The terms of the concatenation of the batches ``terms`` were computed on.

    Gradients: row-weighted means (weights ``count / sum(count)``); moments: Chan et al.'s
    pairwise combination ``M2 = M2_a + M2_b + delta^2 * n_a * n_b / n``.

    Raises:
        ValueError: empty ``terms``, no rows in total, or gradient lists of different
            lengths.
    """
    if not terms:
        raise ValueError("pool_terms needs at least one AdvantageNormTerms")
    total = sum(t.count for t in terms)
    if total <= 0:
        raise ValueError("pool_terms: the batches hold no rows")
    n = len(terms[0].rest)
    if any(len(t.rest) != n for t in terms):
        raise ValueError("pool_terms: gradient lists differ in length")
    w = [t.count / total for t in terms]

    def mean(parts: list[list[np.ndarray]]) -> list[np.ndarray]:
        # sum() starts from the int 0, so each entry is an array (there is at least one term)
        return [
            np.asarray(sum(wk * p[i] for wk, p in zip(w, parts, strict=True))) for i in range(n)
        ]

    count, mu, m2 = 0, 0.0, 0.0
    for t in terms:
        if t.count == 0:
            continue
        new = count + t.count
        delta = t.adv_mean - mu
        mu += delta * t.count / new
        m2 += t.adv_m2 + delta * delta * count * t.count / new
        count = new
    return AdvantageNormTerms(
        rest=mean([t.rest for t in terms]),
        adv_weighted=mean([t.adv_weighted for t in terms]),
        adv_unweighted=mean([t.adv_unweighted for t in terms]),
        count=total,
        adv_mean=mu,
        adv_m2=m2,
    )
