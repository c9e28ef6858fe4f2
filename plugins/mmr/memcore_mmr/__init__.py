"""memcore-mmr: maximal marginal relevance diversification.

This distribution will provide, through memcore's ``register_*`` hooks:

- stage kind `mmr`: re-orders hits to trade relevance against redundancy, using the
  stored vectors of the hits (so it works after a BM25 recall too)

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``mmr``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 4.
"""

__all__: list[str] = []
