"""HyperAmy's A/B/C scenario (design note, section 5), on the public API of memcore-poincare.

Three emotion particles:

- A: anger, strong (v = 0.9), linked to B and C;
- B: anger, weak (v = 0.2);
- C: happy (v = 0.5).

A query "anger, strong" (v = 0.9) is answered three ways:

1. a wide cone (everything is a candidate): A at distance 0, then B (same direction,
   another shell), then C (another direction);
2. a cone of 2 (only the two anger particles are candidates): C is still recalled, as
   A's neighbour, its distance multiplied by the neighbour penalty;
3. a weak query (v = 0.2): the shell of B comes first.

Without decay the weak query finds C (happy, v = 0.5) before A (anger, v = 0.9): near
the centre of the ball directions matter less than intensities.

With ``--decay`` the intensity follows an exponential forgetting curve (half-life one
hour) and the search runs two hours later: A has faded to v = 0.225 and B to 0.05, so
the strong (fresh) query is 1.35 from A and 1.7 from B, and the weak query now finds A
first (0.05 away): a once-strong anger memory has become a weak one. Run:

    python examples/hyperamy_abc.py [--path DIR] [--decay] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

from memcore_poincare import HyperAmyRetrieval, HyperAmyStorage, ParticleProjector, Point, TimePhysics


def run(path: str, decay: bool = False) -> dict[str, list[dict[str, object]]]:
    """Insert A, B, C under ``path`` and return the three searches' results."""
    physics = TimePhysics(f={"law": "exponential", "half_life": 3600.0}) if decay else TimePhysics()
    projector = ParticleProjector(curvature=1.0, scaling_factor=2.0, physics=physics)
    storage = HyperAmyStorage(path)
    retrieval = HyperAmyRetrieval(storage, projector)

    now = time.time()
    anger, happy = np.array([0.9, 0.1, 0.0]), np.array([0.0, 0.1, 0.9])
    storage.upsert_points(
        [
            Point("A", anger, v=0.9, T=0.5, born=now, links=["B", "C"]),
            Point("B", anger, v=0.2, T=0.5, born=now),
            Point("C", happy, v=0.5, T=0.5, born=now),
        ]
    )
    t_now = now + 7200.0 if decay else now

    def show(results):
        return [{"id": r.id, "score": round(r.score, 4), "type": r.match_type, "v": r.metadata["v"]} for r in results]

    strong = Point("Q", anger, v=0.9, T=0.5, born=t_now)
    weak = Point("Q", anger, v=0.2, T=0.5, born=t_now)
    return {
        "wide cone": show(retrieval.search(strong, top_k=3, cone_width=50, neighbor_penalty=1.2, t_now=t_now)),
        "cone of 2": show(retrieval.search(strong, top_k=3, cone_width=2, neighbor_penalty=1.2, t_now=t_now)),
        "weak query": show(retrieval.search(weak, top_k=3, cone_width=50, neighbor_penalty=1.2, t_now=t_now)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="database folder (default: a temporary one)")
    parser.add_argument("--decay", action="store_true", help="exponential forgetting, searched two hours later")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = run(args.path or tmp, args.decay)
    if args.json:
        print(json.dumps(results))
        return
    for name, rows in results.items():
        print(f"{name}:")
        for row in rows:
            print(f"  ID: {row['id']}, Score: {row['score']:.4f}, Type: {row['type']}, v: {row['v']}")


if __name__ == "__main__":
    main()
