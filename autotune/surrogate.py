"""A Gaussian-process model of a tuning landscape, for choosing the next point to measure.

Small discrete spaces suit a GP: a few hundred measurements at most, and every candidate
can be scored. Points are knob-value indices scaled to [0, 1] (ordinal knobs keep their
order, so "neighbouring" block sizes are near). Times are modelled in log space, so a
2x slowdown weighs the same anywhere; failed points are told as the worst time seen,
which steers the search away from regions that do not compile or run (by default; a
second model of where points fail, `SuccessModel`, can keep them out of the time
model instead: `propose(failures=...)`). Length scales
(one per knob), noise and amplitude are fitted by maximising the marginal likelihood
over a small grid, which needs nothing beyond NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LENGTH_SCALES = (0.08, 0.15, 0.3, 0.6, 1.2, 5.0)
NOISES = (1e-4, 1e-2, 0.1)
FIT_SWEEPS = 2
WARM_SWEEPS = 1  # a fit that starts from the same model's previous one (`WarmStart`)
OFFSET_WEIGHTS = (0.0, 0.1, 0.3, 1.0)  # `GaussianProcess.offset_weight`, when it has offset columns
SAMPLED = 200  # `ranking`'s "sample": the candidates one draw of the model covers
LIKELY = 0.5  # with a model of failures, candidates less likely to run than this go last
_SQRT5 = math.sqrt(5.0)
_FAR = 700.0  # `_matern52_of_squared`


def _matern52(a: np.ndarray, b: np.ndarray, length_scales: np.ndarray) -> np.ndarray:
    a = a / length_scales
    b = b / length_scales
    squared = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return _matern52_of_squared(np.maximum(squared, 0.0, out=squared))


def _matern52_of_squared(squared: np.ndarray) -> np.ndarray:
    """Matérn 5/2 of squared scaled distances, in place. Distances are capped where the
    kernel is below 1e-290 anyway: exp of an argument past -745 underflows to zero on a
    slow path (six times the cost), which made it most of a fit."""
    s = np.sqrt(squared, out=squared)
    s *= _SQRT5
    np.minimum(s, _FAR, out=s)
    kernel = s * s
    kernel *= 1.0 / 3.0
    kernel += s
    kernel += 1.0
    np.negative(s, out=s)
    kernel *= np.exp(s, out=s)
    return kernel


def _shared_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair of rows, the share of columns (value indices) on which they are equal: one
    product of one-hot tables (exact counts), not an (a, b, columns) comparison."""
    a_index, b_index = a.astype(int), b.astype(int)
    sizes = np.maximum(a_index.max(0, initial=0), b_index.max(0, initial=0)) + 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    width = int(sizes.sum())
    a_hot, b_hot = np.zeros((len(a), width)), np.zeros((len(b), width))
    np.put_along_axis(a_hot, a_index + starts, 1.0, axis=1)
    np.put_along_axis(b_hot, b_index + starts, 1.0, axis=1)
    return (a_hot @ b_hot.T) / a.shape[1]


@dataclass
class WarmStart:
    """One model's latest fitted hyperparameters, from which its next fit starts: WARM_SWEEPS
    sweeps from there instead of FIT_SWEEPS from the defaults. Meant for a model whose
    training set is full (`SearchOptions.model_points`, `warm_fits`): from one proposal to
    the next that set changes by a point or two and the fit moves little, and the three
    fits of a proposal are most of its cost in long searches."""

    length_scales: np.ndarray | None = None
    noise: float = 1e-2
    offset_weight: float = 0.0


class GaussianProcess:
    """Zero-mean GP on standardised targets; Matérn 5/2 with one length scale per knob.

    With `offset_columns` = m, the last m columns of the points are value indices of m
    knobs, not features: the kernel then adds `offset_weight` x the share of those knobs
    on which two points take the same value (each value of each knob its own random
    offset, the weight fitted from `OFFSET_WEIGHTS`), so one value may be faster than the
    values beside it without bending the smooth part along that knob."""

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        like: GaussianProcess | None = None,
        offset_columns: int = 0,
        warm: WarmStart | None = None,
    ) -> None:
        """Fits the hyperparameters (from `warm`'s, which then holds the new ones, where
        it has any of this shape), or takes them (and the scaling) from `like`."""
        self.x = x
        sweeps = FIT_SWEEPS
        if like is None:
            self.mean = float(y.mean())
            self.scale = float(y.std()) or 1.0
            self.offset_columns = offset_columns
            self.length_scales = np.full(x.shape[1] - offset_columns, 0.3)
            self.noise = 1e-2
            self.offset_weight = 0.0
            earlier = None if warm is None else warm.length_scales
            if warm is not None and earlier is not None and earlier.shape == self.length_scales.shape:
                self.length_scales = earlier.copy()
                self.noise, self.offset_weight, sweeps = warm.noise, warm.offset_weight, WARM_SWEEPS
        else:
            self.mean, self.scale = like.mean, like.scale
            self.length_scales, self.noise = like.length_scales, like.noise
            self.offset_columns, self.offset_weight = like.offset_columns, like.offset_weight
        self.y = (y - self.mean) / self.scale
        m = self.offset_columns  # the training points' shared values: fixed while fitting
        self._shared = _shared_values(x[:, -m:], x[:, -m:]) if m else None
        if like is None:
            self._fit(sweeps)
            if warm is not None:
                warm.length_scales = self.length_scales.copy()
                warm.noise, warm.offset_weight = self.noise, self.offset_weight
        self._factor()

    def _kernel(self, a: np.ndarray, b: np.ndarray, length_scales: np.ndarray, weight: float) -> np.ndarray:
        m = self.offset_columns
        if not m:
            return _matern52(a, b, length_scales)
        smooth = _matern52(a[:, :-m], b[:, :-m], length_scales)
        if not weight:
            return smooth
        shared = self._shared if a is self.x and b is self.x else _shared_values(a[:, -m:], b[:, -m:])
        return smooth + weight * shared

    def _likelihoods(self, length_scales: np.ndarray, noises: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Log marginal likelihoods with the amplitude profiled out, one per setting (row of
        `length_scales`, with its noise and offset weight), from one batched factorisation.
        Each kernel is bordered with the targets: the last row of the factor of
        [[K, y], [y', c]] is (L^-1 y)', so the quadratic form needs no second solve (c is
        any value that keeps the matrix positive definite: y'y / noise + 1 does)."""
        n, count = len(self.y), len(length_scales)
        kernel = _matern52_of_squared((1.0 / length_scales**2) @ self._differences)
        if self._shared is not None:
            kernel += weights[:, None] * self._shared_lower
        kernel[:, self._on_diagonal] += noises[:, None]
        # Only the lower triangle: the factorisation reads no other entry.
        bordered = np.zeros((count, (n + 1) * (n + 1)))
        bordered[:, self._lower_flat] = kernel
        bordered = bordered.reshape(count, n + 1, n + 1)
        bordered[:, n, :n] = self.y
        bordered[:, n, n] = float(self.y @ self.y) / noises + 1.0
        try:
            factor = np.linalg.cholesky(bordered)
        except np.linalg.LinAlgError:
            if count == 1:
                return np.array([-math.inf])
            return np.concatenate(
                [
                    self._likelihoods(length_scales[i : i + 1], noises[i : i + 1], weights[i : i + 1])
                    for i in range(count)
                ]
            )
        amplitude = np.maximum((factor[:, n, :n] ** 2).sum(1) / n, 1e-12)
        log_determinant = np.log(np.diagonal(factor[:, :n, :n], axis1=1, axis2=2)).sum(1)
        return -0.5 * n * np.log(amplitude) - log_determinant

    def _prepare_fit(self) -> None:
        """The tables every likelihood of the fit reads: per pair of training points (the
        lower triangle) the squared difference in each smooth feature, and shared values."""
        smooth = self.x[:, : self.x.shape[1] - self.offset_columns]
        rows, columns = np.tril_indices(len(smooth))
        self._lower_flat = rows * (len(smooth) + 1) + columns
        self._on_diagonal = np.flatnonzero(rows == columns)
        self._shared_lower = None if self._shared is None else self._shared[rows, columns]
        self._differences = ((smooth[rows] - smooth[columns]) ** 2).T

    def _fit(self, sweeps: int) -> None:
        """`sweeps` coordinate sweeps over the grids (noise, offset weight, each length scale), the
        values of one coordinate scored in one batch; a value is taken where it beats the
        best so far (the first of equals)."""
        self._prepare_fit()
        ones = np.ones(1)
        best = float(
            self._likelihoods(self.length_scales[None], ones * self.noise, ones * self.offset_weight)[0]
        )

        def choose(length_scales: np.ndarray, noises: np.ndarray, weights: np.ndarray) -> int | None:
            nonlocal best
            scores = self._likelihoods(length_scales, noises, weights)
            i = int(np.argmax(scores))
            if scores[i] > best:
                best = float(scores[i])
                return i
            return None

        for _ in range(sweeps):
            noises = np.array(NOISES)
            i = choose(
                np.tile(self.length_scales, (len(noises), 1)),
                noises,
                np.full(len(noises), self.offset_weight),
            )
            if i is not None:
                self.noise = float(noises[i])
            if self.offset_columns:
                weights = np.array(OFFSET_WEIGHTS)
                tiled = np.tile(self.length_scales, (len(weights), 1))
                i = choose(tiled, np.full(len(weights), self.noise), weights)
                if i is not None:
                    self.offset_weight = float(weights[i])
            grid = np.array(LENGTH_SCALES)
            for dim in range(len(self.length_scales)):
                trials = np.tile(self.length_scales, (len(grid), 1))
                trials[:, dim] = grid
                i = choose(trials, np.full(len(grid), self.noise), np.full(len(grid), self.offset_weight))
                if i is not None:
                    self.length_scales = trials[i].copy()
        del self._differences, self._lower_flat, self._on_diagonal, self._shared_lower

    def _factor(self) -> None:
        n = len(self.y)
        k = self._kernel(self.x, self.x, self.length_scales, self.offset_weight) + self.noise * np.eye(n)
        self._chol = np.linalg.cholesky(k)
        self._alpha = np.linalg.solve(self._chol.T, np.linalg.solve(self._chol, self.y))
        self._amplitude = max(float(self.y @ self._alpha) / n, 1e-12)

    def predict_mean(self, x: np.ndarray) -> np.ndarray:
        """Mean only, on the standardised scale (far cheaper than with the deviation)."""
        return self._kernel(x, self.x, self.length_scales, self.offset_weight) @ self._alpha

    def sample(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw of the function at the points `x` together (their covariance, not
        each alone), on the standardised scale."""
        cross = self._kernel(x, self.x, self.length_scales, self.offset_weight)
        v = np.linalg.solve(self._chol, cross.T)
        covariance = self._kernel(x, x, self.length_scales, self.offset_weight) - v.T @ v
        covariance *= self._amplitude
        covariance[np.diag_indices_from(covariance)] += 1e-9 * self._amplitude
        values, vectors = np.linalg.eigh(covariance)
        spread = vectors * np.sqrt(np.maximum(values, 0.0))
        return cross @ self._alpha + spread @ rng.standard_normal(len(x))

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation, on the standardised scale."""
        cross = self._kernel(x, self.x, self.length_scales, self.offset_weight)
        mean = cross @ self._alpha
        v = np.linalg.solve(self._chol, cross.T)
        prior = 1.0 + self.offset_weight
        variance = np.maximum(prior - (v * v).sum(0), 1e-12) * self._amplitude
        return mean, np.sqrt(variance)


_erf = np.frompyfunc(math.erf, 1, 1)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    z = (best - mean) / std
    cdf = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)).astype(float))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mean) * cdf + std * pdf


class SuccessModel:
    """The chance that a point runs (compiles and runs), from which measured points
    failed: a GP regression on the labels (1 failed, 0 ran), its own length scales
    fitted as the time model's are, its mean read as the chance to fail. Cheap and
    NumPy-only; far from every measured point it falls back to the share that failed."""

    FLOOR = 1e-3  # every candidate keeps some weight, so expected improvement still ranks them

    def __init__(self, x: np.ndarray, failed: np.ndarray) -> None:
        self.model = GaussianProcess(x, failed.astype(float))

    def probability(self, x: np.ndarray) -> np.ndarray:
        """P(the point runs), clipped to [FLOOR, 1]."""
        fail = self.model.predict_mean(x) * self.model.scale + self.model.mean
        return np.clip(1.0 - fail, self.FLOOR, 1.0)


class KernelSuccess:
    """The chance that a point runs, as a kernel-weighted share of the measured points
    near it that ran (Nadaraya-Watson), pulled toward the share over all of them by one
    point's weight. Unlike a regression on the labels it stays within [0, 1] and falls
    back to that share far from every point instead of swinging past it. Length scales
    (one per feature) are chosen from the time model's grid by the leave-one-out
    likelihood of the labels, in coordinate sweeps as the time model's are."""

    FLOOR = 1e-3

    def __init__(self, x: np.ndarray, failed: np.ndarray) -> None:
        self.x = x
        self.failed = failed.astype(float)
        self.prior = (self.failed.sum() + 1.0) / (len(self.failed) + 2.0)
        self.length_scales = np.full(x.shape[1], 0.3)
        best = self._leave_one_out(self.length_scales)
        for _ in range(FIT_SWEEPS):
            for dim in range(x.shape[1]):
                for value in LENGTH_SCALES:
                    trial = self.length_scales.copy()
                    trial[dim] = value
                    score = self._leave_one_out(trial)
                    if score > best:
                        best, self.length_scales = score, trial

    def _leave_one_out(self, length_scales: np.ndarray) -> float:
        weights = _matern52(self.x, self.x, length_scales)
        np.fill_diagonal(weights, 0.0)
        fail = (self.prior + weights @ self.failed) / (1.0 + weights.sum(1))
        fail = np.clip(fail, 1e-6, 1.0 - 1e-6)
        return float((self.failed * np.log(fail) + (1.0 - self.failed) * np.log(1.0 - fail)).sum())

    def probability(self, x: np.ndarray) -> np.ndarray:
        """P(the point runs), clipped to [FLOOR, 1]."""
        weights = _matern52(x, self.x, self.length_scales)
        fail = (self.prior + weights @ self.failed) / (1.0 + weights.sum(1))
        return np.clip(1.0 - fail, self.FLOOR, 1.0)


def propose(
    measured: np.ndarray,
    values: list[float | None],
    candidates: np.ndarray,
    pending: np.ndarray | None = None,
    acquisition: str = "ei",
    failures: str = "worst",
    failure_quantile: float = 0.9,
) -> int:
    """Index into `candidates` of the point to measure next (`ranking`'s first)."""
    return int(ranking(measured, values, candidates, pending, acquisition, failures, failure_quantile)[0])


def normal_scores(values: np.ndarray) -> np.ndarray:
    """Each value's rank as a standard normal quantile (ties share their mean rank): a
    model of these sees the order of the times and not how far apart they are, so a few
    points many times slower than the rest do not flatten the differences near the best."""
    from scipy.stats import norm, rankdata

    if len(values) < 2:
        return np.zeros(len(values))
    return norm.ppf((rankdata(values) - 0.5) / len(values))


def ranking(
    measured: np.ndarray,
    values: list[float | None],
    candidates: np.ndarray,
    pending: np.ndarray | None = None,
    acquisition: str = "ei",
    failures: str = "worst",
    failure_quantile: float = 0.9,
    offset_columns: int = 0,
    beyond: float | None = None,
    rng: np.random.Generator | None = None,
    warm: WarmStart | None = None,
    targets: str = "log",
) -> np.ndarray:
    """Indices into `candidates`, best first: by the highest expected improvement ("ei"),
    the lowest predicted time ("mean"), or the lowest time in one draw of the model
    ("sample": among the `SAMPLED` candidates of the lowest optimistic time, mean less two
    deviations, the rest after them by their mean; `rng` draws). The caller takes the first that it may
    measure, so a space whose validity is costly to check need not check every candidate.

    `values` holds times (None: failed). `pending` points are being measured: they are
    added at the model's own prediction (kriging believer), so a pipeline of proposals
    spreads out instead of piling onto one spot. `failures` (`SearchOptions.failures`):
    failed points told as the worst log time ("worst"), as the `failure_quantile`
    quantile of the log times ("quantile"), or kept out of the time model and given to a
    model of the chance to run (`KernelSuccess` for "kernel", `SuccessModel` for "model")
    that weights the choice, candidates below `LIKELY` ranked after all others. The last
    `offset_columns` columns of the points are value indices (`GaussianProcess`).
    Candidates whose predicted log time is above `beyond` are left out of the order.
    The time model's fit starts from `warm` (`WarmStart`) where given. `targets`
    (`SearchOptions.targets`): the model fits log times ("log") or their normal scores
    ("ranks", `normal_scores`).
    """
    logs = [math.log(v) for v in values if v is not None]
    success: SuccessModel | KernelSuccess | None = None
    if failures in ("model", "kernel") and logs:  # with nothing that ran, as "worst"
        ran = np.array([v is not None for v in values])
        if not ran.all():
            features = measured[:, : measured.shape[1] - offset_columns]  # not the value indices
            success = SuccessModel(features, ~ran) if failures == "model" else KernelSuccess(features, ~ran)
            measured = measured[ran]
        y = np.array(logs)
    else:
        if failures == "quantile" and logs:
            fill = float(np.quantile(logs, failure_quantile))
        else:
            fill = max(logs) if logs else 0.0
        y = np.array([math.log(v) if v is not None else fill for v in values])
    if targets == "ranks":
        y = normal_scores(y)
    elif targets != "log":
        raise ValueError(f"unknown targets {targets!r} (log or ranks)")
    model = GaussianProcess(measured, y, offset_columns=offset_columns, warm=warm)
    best = float(model.y.min())
    if pending is not None and len(pending):
        believed, _ = model.predict(pending)
        x = np.vstack([measured, pending])
        model = GaussianProcess(x, np.concatenate([y, believed * model.scale + model.mean]), like=model)
    features = candidates[:, : candidates.shape[1] - offset_columns]
    chance = None if success is None else success.probability(features)
    # Candidates more likely to fail than to run go after every other one.
    unlikely = np.zeros(len(candidates), bool) if chance is None else chance < LIKELY
    mean = None
    if acquisition == "mean":
        score = mean = model.predict_mean(candidates)
    elif acquisition == "ei":
        mean, std = model.predict(candidates)
        improvement = expected_improvement(mean, std, best)
        score = -(improvement if chance is None else improvement * chance)
    elif acquisition == "sample":
        mean, std = model.predict(candidates)
        shortlist = np.argsort(mean - 2.0 * std, kind="stable")[:SAMPLED]
        score = mean + (mean.max() - mean.min() + 1.0)  # the rest after the shortlist
        score[shortlist] = model.sample(candidates[shortlist], rng or np.random.default_rng(0))
        score[shortlist] -= score[shortlist].max() - mean.min() + 1.0
    else:
        raise ValueError(f"unknown acquisition {acquisition!r} (ei, mean or sample)")
    # Stable: of equal scores the earlier candidate first, as argmin / argmax take it.
    order = np.lexsort((score, unlikely))
    if beyond is not None and mean is not None:
        order = order[mean[order] * model.scale + model.mean <= beyond]
    return order
