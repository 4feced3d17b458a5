"""Bradley-Terry strengths from a pairwise wins matrix, by minorization-maximization.

The fit follows R2S-Eval appendix D.4 (Table VIII): MM updates (Hunter 2004), at most
1000 iterations, tolerance 1e-8 on the largest change of a strength, stability
constant 1e-12, strengths ``b`` summing to 1, latent ``theta = log b`` and reported
score ``s = 100 b``.

One MM step, for every policy ``i`` at once::

    b_i <- W_i / sum_j N_ij / (b_i + b_j)

with ``W_i`` the wins of ``i`` and ``N_ij = wins[i, j] + wins[j, i]`` the comparisons
of the pair. A policy that never wins gets strength 0 (its MLE limit); when the
comparison graph falls apart into pieces, each piece is fitted on its own and holds
a share of the total strength proportional to its number of policies (a convention:
the data say nothing about how pieces compare), with a warning.

>>> import numpy as np
>>> wins = np.array([[0, 8, 9], [2, 0, 6], [1, 4, 0]])
>>> res = fit_bradley_terry(wins)
>>> res.scores.round(2).tolist(), res.converged
([73.75, 16.26, 9.99], True)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

MAX_ITER = 1000
TOL = 1e-8
EPS = 1e-12
DENSE_INCIDENCE_LIMIT = 20_000  # pairs x policies below which a dense matmul is faster
CHUNK_ELEMENTS = 2_000_000  # pair terms per MM chunk (16 MB of float64)


class DisconnectedComparisonsWarning(UserWarning):
    """The comparison graph is not connected: pieces cannot be placed on one scale."""


class ConvergenceWarning(UserWarning):
    """The MM iterations stopped at ``max_iter`` before reaching ``tol``."""


@dataclass(frozen=True)
class BTResult:
    """A Bradley-Terry fit. Arrays have shape (n_policies,) or (batch, n_policies).

    strengths: ``b``, non-negative, summing to 1 over policies.
    theta: ``log(max(b, eps))``, the latent scores.
    scores: ``100 * b``, the reported 0-100 scores.
    iterations: MM steps taken; converged: whether the last step moved less than tol.
    """

    strengths: NDArray[np.float64]
    theta: NDArray[np.float64]
    scores: NDArray[np.float64]
    iterations: int
    converged: bool | NDArray[np.bool_]


def validate_wins(wins: ArrayLike, batched: bool = False) -> NDArray[np.float64]:
    """Check a wins matrix (or a stack of them) and return it as float64.

    Raises ValueError for anything but finite, non-negative, square counts with an
    empty diagonal and at least two policies.

    >>> validate_wins([[0, 1], [2, 0]]).dtype
    dtype('float64')
    >>> validate_wins([[0, -1], [2, 0]])
    Traceback (most recent call last):
    ...
    ValueError: wins must be non-negative counts; found -1.0 at (0, 1)
    """
    arr = np.asarray(wins)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"wins: expected numeric counts; got dtype {arr.dtype}")
    want = 3 if batched else 2
    if arr.ndim != want or arr.shape[-1] != arr.shape[-2]:
        shape = "(batch, n, n)" if batched else "(n, n)"
        raise ValueError(f"wins must have shape {shape} (square); got {arr.shape}")
    if arr.shape[-1] < 2:
        raise ValueError(f"need at least 2 policies; got {arr.shape[-1]}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("wins contains NaN or inf")
    if np.any(arr < 0):
        where = tuple(int(k) for k in np.argwhere(arr < 0)[0])
        raise ValueError(f"wins must be non-negative counts; found {arr[where]} at {where}")
    if np.any(np.diagonal(arr, axis1=-2, axis2=-1) != 0):
        raise ValueError("wins has a nonzero diagonal: a policy cannot be compared with itself")
    return arr


def component_shares(totals: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """Components of the comparison graph of ``totals`` (n, n), ``N_ij > 0`` an edge.

    Returns ``(same, share, n_components)``: ``same[i, j] = 1`` when i and j are in
    one component, ``share[i]`` the strength mass of i's component (its size over the
    number of compared policies; 0 for a policy never compared).

    >>> same, share, k = component_shares(np.array([[0., 2, 0], [2, 0, 0], [0, 0, 0]]))
    >>> share.tolist(), k
    ([1.0, 1.0, 0.0], 2)
    """
    k, labels = connected_components(csr_matrix(totals > 0), directed=False)
    same = (labels[:, None] == labels[None, :]).astype(np.float64)
    active = totals.sum(axis=1) > 0
    sizes = same[:, active].sum(axis=1)
    share = np.where(active, sizes / max(int(active.sum()), 1), 0.0)
    return same, share, int(k)


@dataclass(frozen=True)
class PairGraph:
    """The compared pairs ``(first[k], second[k])``, k < P, of n policies.

    ``incidence`` (n, P) maps per-pair terms to per-policy sums (dense when small,
    scipy sparse otherwise); ``same``/``share`` come from :func:`component_shares`
    and are None when the graph is connected.
    """

    n: int
    first: NDArray[np.intp]
    second: NDArray[np.intp]
    incidence: Any
    same: NDArray[np.float64] | None
    share: NDArray[np.float64]
    n_components: int

    @classmethod
    def from_totals(cls, totals: NDArray[np.float64]) -> "PairGraph":
        """Build from a symmetric (n, n) matrix of comparison counts."""
        n = totals.shape[0]
        first, second = np.nonzero(np.triu(totals > 0, 1))
        pairs = np.arange(len(first))
        incidence = csr_matrix((np.ones(2 * len(first)), (np.r_[first, second], np.r_[pairs, pairs])),
                               shape=(n, len(first)))
        if len(first) * n <= DENSE_INCIDENCE_LIMIT:
            incidence = incidence.toarray()
        same, share, k = component_shares(totals)
        return cls(n, first, second, incidence, same if k > 1 else None, share, k)

    def per_policy(self, per_pair: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sum (P, B) per-pair terms into (n, B) per-policy totals."""
        return np.asarray(self.incidence @ per_pair)


def mm_iterate(won: NDArray[np.float64], pair_totals: NDArray[np.float64], graph: PairGraph,
               start: NDArray[np.float64], max_iter: int = MAX_ITER, tol: float = TOL,
               eps: float = EPS) -> tuple[NDArray[np.float64], int, NDArray[np.bool_]]:
    """Batched MM: won (B, n) wins, pair_totals (P,) or (B, P) comparisons per pair.

    ``start`` (B, n) holds initial strengths. Rows are processed in chunks of at most
    ``CHUNK_ELEMENTS`` pair terms; each chunk iterates until every row moves less than
    ``tol`` or ``max_iter`` steps. Returns ``(b, iterations, converged)``, iterations
    being the most any chunk took.
    """
    rows = max(1, CHUNK_ELEMENTS // max(len(graph.first), 1))
    out, steps, conv = np.empty_like(won), 0, np.zeros(len(won), bool)
    for lo in range(0, len(won), rows):
        sl = slice(lo, lo + rows)
        totals = pair_totals[sl].T if pair_totals.ndim == 2 else pair_totals[:, None]
        b, its, conv[sl] = _mm_chunk(np.ascontiguousarray(won[sl].T), np.ascontiguousarray(totals),
                                     graph, np.ascontiguousarray(start[sl].T), max_iter, tol, eps)
        out[sl], steps = b.T, max(steps, its)
    return out, steps, conv


def _mm_chunk(won: NDArray[np.float64], pair_totals: NDArray[np.float64], graph: PairGraph,
              b: NDArray[np.float64], max_iter: int, tol: float,
              eps: float) -> tuple[NDArray[np.float64], int, NDArray[np.bool_]]:
    """MM on policy-major arrays: won and b (n, B), pair_totals (P, 1) or (P, B)."""
    step, iterations = np.full(b.shape[1], np.inf), 0
    for iterations in range(1, max_iter + 1):
        pair_sum = b[graph.first]
        pair_sum += b[graph.second]
        np.maximum(pair_sum, eps, out=pair_sum)
        new = won / np.maximum(graph.per_policy(np.divide(pair_totals, pair_sum, out=pair_sum)), eps)
        new = _normalise(new, graph, eps)
        step = np.abs(new - b).max(axis=0)
        b = new
        if step.max() < tol:
            break
    return b, iterations, step < tol


def _normalise(b: NDArray[np.float64], graph: PairGraph, eps: float) -> NDArray[np.float64]:
    """Rescale (n, B) strengths: columns sum to 1, or each component to its share."""
    if graph.same is None:
        return b / np.maximum(b.sum(axis=0, keepdims=True), eps)
    return b / np.maximum(graph.same @ b, eps) * graph.share[:, None]


def fit_bradley_terry(wins: ArrayLike, max_iter: int = MAX_ITER, tol: float = TOL,
                      eps: float = EPS) -> BTResult:
    """Fit BT strengths to wins (n, n), wins[i, j] = times i was preferred over j.

    Warns (DisconnectedComparisonsWarning) when the comparison graph is not
    connected and (ConvergenceWarning) when ``max_iter`` is reached, e.g. when a
    policy never loses and its strength runs off to 1.

    >>> fit_bradley_terry([[0, 3], [1, 0]]).strengths.tolist()
    [0.75, 0.25]
    >>> float(fit_bradley_terry([[0, 3, 1], [0, 0, 0], [2, 0, 0]]).scores[1])  # never wins
    0.0
    """
    arr = validate_wins(wins)
    totals = arr + arr.T
    graph = PairGraph.from_totals(totals)
    _warn_disconnected(graph)
    pair_totals = totals[graph.first, graph.second]
    b, iterations, converged = mm_iterate(arr.sum(axis=1)[None], pair_totals, graph,
                                          _uniform_start(graph)[None], max_iter, tol, eps)
    if not converged[0]:
        warnings.warn(f"MM did not converge in {max_iter} iterations", ConvergenceWarning,
                      stacklevel=2)
    return _result(b[0], iterations, bool(converged[0]), eps)


def fit_bradley_terry_batch(wins: ArrayLike, max_iter: int = MAX_ITER, tol: float = TOL,
                            eps: float = EPS, start: ArrayLike | None = None) -> BTResult:
    """Fit many wins matrices (B, n, n) at once; results have shape (B, n).

    Components are taken from the union of the matrices' comparison graphs; a matrix
    lacking a pair that others compare is warned about (its pieces could be left on
    arbitrary relative scales). Bootstrap replicates share one pattern. ``start`` (n,)
    or (B, n) warm-starts the MM. ``converged`` is a (B,) bool array.

    >>> stack = np.array([[[0, 3], [1, 0]], [[0, 1], [1, 0]]])
    >>> fit_bradley_terry_batch(stack).strengths.tolist()
    [[0.75, 0.25], [0.5, 0.5]]
    """
    arr = validate_wins(wins, batched=True)
    totals = arr + arr.swapaxes(1, 2)
    graph = PairGraph.from_totals(totals.sum(axis=0))
    _warn_disconnected(graph)
    pair_totals = totals[:, graph.first, graph.second]
    if np.any(pair_totals == 0):
        warnings.warn("some matrices in the batch lack pairs that others compare",
                      DisconnectedComparisonsWarning, stacklevel=2)
    init = _uniform_start(graph) if start is None else np.asarray(start, np.float64)
    b, iterations, converged = mm_iterate(arr.sum(axis=2), pair_totals,
                                          graph, np.broadcast_to(init, arr.shape[:2]),
                                          max_iter, tol, eps)
    return _result(b, iterations, converged, eps)


def _uniform_start(graph: PairGraph) -> NDArray[np.float64]:
    return np.where(graph.share > 0, 1.0, 0.0)


def _warn_disconnected(graph: PairGraph) -> None:
    if graph.n_components > 1:
        warnings.warn(f"comparison graph has {graph.n_components} components: their relative "
                      "strengths are not identified; each gets mass proportional to its size",
                      DisconnectedComparisonsWarning, stacklevel=3)


def _result(b: NDArray[np.float64], iterations: int, converged: bool | NDArray[np.bool_],
            eps: float) -> BTResult:
    return BTResult(strengths=b, theta=np.log(np.maximum(b, eps)), scores=100.0 * b,
                    iterations=iterations, converged=converged)
