"""Physics of the particles: time evolution laws and the projection into the Poincaré ball.

- :class:`EvolutionLaw` / :class:`TimePhysics`: ``f(v, t_born, t_now)`` (intensity) and
  ``g(T, t_born, t_now)`` (temperature). Identity by default (clamped at 0, as in the
  design); ``exponential`` decay (``half_life``) and ``power`` law forgetting
  (``x · (1 + Δt/tau)^-alpha``) are selectable. Every law works on scalars and arrays.
- :class:`ParticleProjector`: direction = the normalised vector, radius
  ``r = tanh(sqrt(c)·v_now·scaling/2)/sqrt(c)`` in the ball of curvature ``-c``, and the
  Poincaré distance ``acosh(1 + 2c|x-y|² / ((1-c|x|²)(1-c|y|²))) / sqrt(c)``, computed for
  a whole candidate matrix at once.

Numerical stability near the boundary: a point is kept as (unit direction ``u``, argument
``a = sqrt(c)·v_now·scaling/2``). The conformal factor ``1 - c|x|²`` equals ``sech²(a)``
exactly, computed as such (never as ``1 - tanh²``, which cancels to 0 once ``tanh(a)``
rounds to 1 at ``a ≈ 19``); ``a`` is clamped at :data:`MAX_ARG` (15: ``sqrt(c)|x| ≤ 1 -
1.9e-13``, distance to the origin ≤ 30/sqrt(c)), and ``|x-y|²`` is formed as ``(r_x-r_y)² +
r_x·r_y·|u-w|²`` (no cancellation between nearby points). ``acosh(1+z)`` is
``log1p(z + sqrt(z(z+2)))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from memcore.plugin import ValidationError

__all__ = [
    "EvolutionLaw",
    "TimePhysics",
    "ParticleProjector",
    "ParticleStates",
    "LAWS",
    "MAX_ARG",
    "poincare_distance",
    "unit_directions",
]

MAX_ARG = 15.0
"""Largest projection argument a = sqrt(c)·v·scaling/2 (the boundary clamp)."""


def _identity(x: Any, dt: Any, law: "EvolutionLaw") -> Any:
    return x


def _exponential(x: Any, dt: Any, law: "EvolutionLaw") -> Any:
    return x * np.exp(-math.log(2.0) * dt / law.half_life)


def _power(x: Any, dt: Any, law: "EvolutionLaw") -> Any:
    return x * np.power(1.0 + dt / law.tau, -law.alpha)


LAWS: dict[str, Callable[[Any, Any, "EvolutionLaw"], Any]] = {
    "identity": _identity,
    "exponential": _exponential,
    "power": _power,
}
"""Evolution laws by name: ``law(x, elapsed, settings) -> x_now`` (before the clamp at 0)."""


class EvolutionLaw(BaseModel):
    """How one quantity (intensity ``v`` or temperature ``T``) changes with time.

    ``identity``: constant; ``exponential``: ``x·2^(-Δt/half_life)``; ``power``:
    ``x·(1 + Δt/tau)^(-alpha)`` (a power-law forgetting curve). Δt = max(0, t_now - born)
    in seconds; the result is clamped at 0.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    law: Literal["identity", "exponential", "power"] = "identity"
    half_life: float = Field(86_400.0, gt=0, allow_inf_nan=False, description="exponential: seconds to halve.")
    tau: float = Field(3_600.0, gt=0, allow_inf_nan=False, description="power: time scale in seconds.")
    alpha: float = Field(0.5, gt=0, allow_inf_nan=False, description="power: exponent of the forgetting curve.")

    def __call__(self, x: Any, t_born: Any, t_now: Any) -> Any:
        """``x`` evolved from ``t_born`` to ``t_now`` (scalars or arrays), never below 0."""
        if self.law == "identity":  # no elapsed time to compute (the search's common case)
            out = np.maximum(np.asarray(x, dtype=np.float64), 0.0)
        else:
            dt = np.maximum(np.subtract(t_now, t_born, dtype=np.float64), 0.0)
            out = np.maximum(LAWS[self.law](np.asarray(x, dtype=np.float64), dt, self), 0.0)
        return float(out) if np.ndim(out) == 0 else out


class TimePhysics:
    """The evolution laws of a particle: ``f`` for the intensity, ``g`` for the temperature.

    ``TimePhysics()`` is the design's identity physics (values clamped at 0).
    """

    def __init__(self, f: EvolutionLaw | dict[str, Any] | None = None, g: EvolutionLaw | dict[str, Any] | None = None):
        self.f_law = f if isinstance(f, EvolutionLaw) else EvolutionLaw(**(f or {}))
        self.g_law = g if isinstance(g, EvolutionLaw) else EvolutionLaw(**(g or {}))

    def f(self, v: Any, t_born: Any, t_now: Any) -> Any:
        """Intensity at ``t_now`` of a particle born at ``t_born`` with intensity ``v``."""
        return self.f_law(v, t_born, t_now)

    def g(self, T: Any, t_born: Any, t_now: Any) -> Any:
        """Temperature at ``t_now`` of a particle born at ``t_born`` with temperature ``T``."""
        return self.g_law(T, t_born, t_now)


def unit_directions(vectors: Any, what: str = "vectors", allow_zero: bool = False, dtype: npt.DTypeLike = np.float32) -> np.ndarray:
    """Rows of ``vectors`` (n, d) normalised to unit length (``dtype``, float32 by default).

    NaN or infinite values are a :class:`memcore.ValidationError`; so is a zero row unless
    ``allow_zero`` (then it stays zero: the design's zero-vector guard, a point at the
    origin).
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValidationError(f"{what}: expected a (n, d) matrix of vectors, got shape {x.shape}")
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        raise ValidationError(f"{what}: vector {int(np.argmin(finite))} contains NaN or infinite values")
    norms = np.linalg.norm(x, axis=1)
    zero = norms < 1e-12
    if zero.any() and not allow_zero:
        raise ValidationError(f"{what}: vector {int(np.argmax(zero))} is all zeros (it has no direction)")
    out: np.ndarray = np.divide(x, norms[:, None], out=np.zeros_like(x), where=~zero[:, None])
    return out.astype(dtype, copy=False)


@dataclass(frozen=True)
class ParticleStates:
    """Particles projected at one time: unit directions ``u`` (n, d), projection argument
    ``a`` (n,), radius ``r = tanh(a)/sqrt(c)`` and conformal factor ``den = 1 - c r² =
    sech²(a)``, plus the evolved intensities and temperatures."""

    u: np.ndarray
    a: np.ndarray
    r: np.ndarray
    den: np.ndarray
    v_now: np.ndarray
    T_now: np.ndarray

    def coordinates(self) -> np.ndarray:
        """The Poincaré-ball coordinates ``r·u`` (n, d)."""
        coordinates: np.ndarray = self.u * self.r[:, None]
        return coordinates


class ParticleProjector:
    """Euclidean directions + physics -> points of the Poincaré ball of curvature ``-c``.

    ``curvature`` (c > 0): the larger, the more curved (ball radius 1/sqrt(c));
    ``scaling_factor``: intensity multiplier (the larger, the closer to the boundary at
    equal intensity); ``physics``: the :class:`TimePhysics` (identity by default).
    """

    def __init__(self, curvature: float = 1.0, scaling_factor: float = 2.0, physics: TimePhysics | None = None):
        if not (math.isfinite(curvature) and curvature > 0):
            raise ValidationError(f"curvature must be a finite number > 0, got {curvature!r}")
        if not (math.isfinite(scaling_factor) and scaling_factor > 0):
            raise ValidationError(f"scaling_factor must be a finite number > 0, got {scaling_factor!r}")
        self.c = float(curvature)
        self.sqrt_c = math.sqrt(self.c)
        self.scaling_factor = float(scaling_factor)
        self.physics = physics or TimePhysics()

    # -- projection ------------------------------------------------------------------------

    def states(self, directions: np.ndarray, v: Any, T: Any, born: Any, t_now: float) -> ParticleStates:
        """Project ``n`` particles at ``t_now`` in one array operation.

        ``directions``: (n, d) unit (or zero) rows; ``v``, ``T``, ``born``: (n,) arrays or scalars.
        """
        n = directions.shape[0]
        v_now = _vector(self.physics.f(v, born, t_now), n)
        T_now = _vector(self.physics.g(T, born, t_now), n)
        a = np.minimum(v_now * (self.sqrt_c * self.scaling_factor / 2.0), MAX_ARG)
        u = directions.astype(np.float64)
        zero = np.einsum("ij,ij->i", u, u) == 0.0  # exact in float64 for float32 or float64 rows (no underflow to 0)
        if zero.any():
            a[zero] = 0.0  # zero-vector guard: the origin
        r = np.tanh(a) / self.sqrt_c
        den = np.cosh(a)
        den = 1.0 / (den * den)
        return ParticleStates(u, a, r, den, v_now, T_now)

    def compute_state(self, vec: Any, v: float, T: float, born: float, t_now: float) -> dict[str, Any]:
        """One particle's state, as in the design: ``current_vector`` (its ball coordinates),
        ``current_v`` and ``current_T``. A zero vector maps to the origin."""
        u = unit_directions(np.asarray(vec, dtype=np.float64).reshape(1, -1), "vec", allow_zero=True, dtype=np.float64)
        s = self.states(u, v, T, born, t_now)
        return {"current_vector": s.coordinates()[0], "current_v": float(s.v_now[0]), "current_T": float(s.T_now[0])}

    # -- distance --------------------------------------------------------------------------

    def distance(self, query: ParticleStates, candidates: ParticleStates) -> np.ndarray:
        """Poincaré distances (n,) from the single particle ``query`` to every candidate."""
        u = candidates.u
        w = query.u[0]
        diff = u - w
        uw: np.ndarray = np.einsum("ij,ij->i", diff, diff)
        rx, ry = candidates.r, query.r[0]
        sq = (rx - ry) ** 2 + rx * ry * uw
        z = 2.0 * self.c * sq / (candidates.den * query.den[0])
        distances: np.ndarray = np.log1p(z + np.sqrt(z * (z + 2.0))) / self.sqrt_c
        return distances


def _vector(values: Any, n: int) -> np.ndarray:
    """``values`` (a scalar or an (n,) array) as an (n,) float64 array."""
    out = np.asarray(values, dtype=np.float64)
    return out if out.shape == (n,) else np.broadcast_to(out, (n,))


def poincare_distance(x: Any, y: Any, curvature: float = 1.0, eps: float = 1e-12) -> np.ndarray:
    """Poincaré distance between points given by coordinates (rows of ``x`` and ``y``,
    broadcast): ``acosh(1 + 2c|x-y|²/((1-c|x|²)(1-c|y|²)))/sqrt(c)``. Norms are clamped
    just inside the ball (``sqrt(c)|x| ≤ 1 - eps``)."""
    c = float(curvature)
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    limit = (1.0 - eps) / math.sqrt(c)

    def clamp(p: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(p, axis=-1, keepdims=True)
        return np.where(n > limit, p * (limit / np.maximum(n, 1e-300)), p)

    x, y = clamp(x), clamp(y)
    sq: np.ndarray = np.sum((x - y) ** 2, axis=-1)
    den = (1.0 - c * np.sum(x * x, axis=-1)) * (1.0 - c * np.sum(y * y, axis=-1))
    z = 2.0 * c * sq / np.maximum(den, 1e-300)
    distances: np.ndarray = np.log1p(z + np.sqrt(z * (z + 2.0))) / math.sqrt(c)
    return distances
