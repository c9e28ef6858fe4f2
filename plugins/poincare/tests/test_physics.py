"""Physics: evolution laws, projection radius, Poincaré distance (curvature, boundary)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memcore import ValidationError
from memcore_poincare import EvolutionLaw, ParticleProjector, TimePhysics, poincare_distance
from memcore_poincare.physics import MAX_ARG, unit_directions


def mobius_distance(x, y, c):
    """The direct formula: d_c(x, y) = 2/sqrt(c) · artanh(sqrt(c)·|(-x) ⊕_c y|)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    mx = -x
    xy, x2, y2 = mx @ y, mx @ mx, y @ y
    num = (1 + 2 * c * xy + c * y2) * mx + (1 - c * x2) * y
    den = 1 + 2 * c * xy + c * c * x2 * y2
    return 2 / math.sqrt(c) * math.atanh(math.sqrt(c) * np.linalg.norm(num / den))


def test_identity_physics_is_the_design_default():
    phys = TimePhysics()
    assert phys.f(0.7, 0.0, 1e9) == 0.7
    assert phys.g(0.3, 5.0, 1.0) == 0.3
    assert phys.f(-2.0, 0.0, 1.0) == 0.0  # clamped at 0
    assert phys.g(-1.0, 0.0, 1.0) == 0.0


def test_exponential_and_power_laws():
    exp = EvolutionLaw(law="exponential", half_life=10.0)
    assert exp(8.0, 0.0, 10.0) == pytest.approx(4.0)
    assert exp(8.0, 0.0, 30.0) == pytest.approx(1.0)
    assert exp(8.0, 5.0, 0.0) == pytest.approx(8.0)  # no evolution before birth
    power = EvolutionLaw(law="power", tau=2.0, alpha=1.0)
    assert power(6.0, 0.0, 4.0) == pytest.approx(2.0)
    arr = TimePhysics(f={"law": "exponential", "half_life": 1.0}).f(np.array([1.0, 2.0]), np.array([0.0, 1.0]), 2.0)
    assert arr == pytest.approx([0.25, 1.0])


def test_radius_formula():
    for c, s, v in [(1.0, 2.0, 0.9), (0.5, 1.0, 0.3), (3.0, 2.5, 0.05)]:
        state = ParticleProjector(c, s).compute_state(np.array([3.0, 4.0]), v, 0.5, 0.0, 0.0)
        r = math.tanh(math.sqrt(c) * v * s / 2) / math.sqrt(c)
        assert np.linalg.norm(state["current_vector"]) == pytest.approx(r, rel=1e-12)
        assert state["current_vector"] == pytest.approx(np.array([0.6, 0.8]) * r)


@pytest.mark.parametrize("c", [0.25, 1.0, 2.0, 7.5])
def test_distance_matches_the_direct_formula(c):
    rng = np.random.default_rng(int(c * 100))
    proj = ParticleProjector(curvature=c, scaling_factor=2.0)
    dirs = unit_directions(rng.standard_normal((20, 6)), dtype=np.float64)
    v = rng.uniform(0.0, 3.0, 20)
    states = proj.states(dirs, v, 0.0, 0.0, 0.0)
    q = proj.states(dirs[:1], 1.3, 0.0, 0.0, 0.0)
    got = proj.distance(q, states)
    coords, qx = states.coordinates(), q.coordinates()[0]
    want = [mobius_distance(qx, x, c) for x in coords]
    assert got == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert poincare_distance(qx, coords, c) == pytest.approx(want, rel=1e-6, abs=1e-9)
    if c == 1.0:  # the c = 1 form of the issue
        x, y = qx, coords[3]
        ref = math.acosh(1 + 2 * np.sum((x - y) ** 2) / ((1 - x @ x) * (1 - y @ y)))
        assert got[3] == pytest.approx(ref, rel=1e-9)


def test_boundary_stability():
    proj = ParticleProjector(curvature=2.0, scaling_factor=2.0)
    d = unit_directions(np.array([[1.0, 0.0], [1.0, 1e-7], [0.0, 1.0]]), dtype=np.float64)
    for v in (10.0, 50.0, 1e6, 1e300):
        s = proj.states(d, v, 0.0, 0.0, 0.0)
        assert np.all(s.r < 1 / math.sqrt(2.0)) and np.all(s.den > 0)
        assert s.r[0] == pytest.approx(1 / math.sqrt(2.0), rel=1e-12)  # r -> 1/sqrt(c)
        dist = proj.distance(proj.states(d[:1], v, 0.0, 0.0, 0.0), s)
        assert np.all(np.isfinite(dist))
        assert dist[0] == 0.0 and 0 < dist[1] < dist[2]
    # monotone in v until the clamp, then constant
    vs = np.array([0.1, 1.0, 5.0, 10.0, 14.9, 15.0, 1e9])
    s = proj.states(np.repeat(d[:1], len(vs), axis=0), vs, 0.0, 0.0, 0.0)
    origin = proj.states(np.zeros((1, 2)), 0.0, 0.0, 0.0, 0.0)
    to_origin = proj.distance(origin, s)
    assert np.all(np.diff(to_origin) >= 0) and to_origin[-1] == pytest.approx(2 * MAX_ARG / math.sqrt(2.0))
    # coordinates at the boundary still work with the coordinate-based function
    assert np.isfinite(poincare_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0]))).all()


def test_zero_vector_is_guarded_nan_is_rejected():
    proj = ParticleProjector()
    state = proj.compute_state(np.zeros(4), 0.9, 0.5, 0.0, 0.0)
    assert np.all(state["current_vector"] == 0)
    with pytest.raises(ValidationError):
        proj.compute_state(np.array([1.0, np.nan]), 0.9, 0.5, 0.0, 0.0)
    with pytest.raises(ValidationError):
        unit_directions(np.zeros((2, 3)))
    with pytest.raises(ValidationError):
        unit_directions(np.array([[np.inf, 1.0]]))


@pytest.mark.parametrize("c,s", [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (float("nan"), 1.0)])
def test_bad_projector_settings(c, s):
    with pytest.raises(ValidationError):
        ParticleProjector(c, s)


def test_law_settings_are_validated():
    from pydantic import ValidationError as PydanticError

    with pytest.raises(PydanticError):
        EvolutionLaw(law="linear")
    with pytest.raises(PydanticError):
        EvolutionLaw(law="exponential", half_life=0)
