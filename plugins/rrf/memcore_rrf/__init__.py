"""memcore-rrf: rank fusion strategies.

This distribution will provide, through memcore's ``register_*`` hooks:

- fusion kinds `weighted` (weighted rank/score fusion), `dbsf` (distribution-based score
  fusion) and `union`, complementing reciprocal rank fusion; each keeps every
  contributing list in `Hit.provenance`

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``rrf``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 4.
"""

__all__: list[str] = []
