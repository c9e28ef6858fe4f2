"""memcore-graph: graph index over record links (networkx).

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `graph`: a networkx graph built from `Record.links`, searched from seed
  records with score = seed score x decay^hops
- stage kind `graph_recall`: expands the hits of earlier stages along links

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``graph``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 3.
"""

__all__: list[str] = []
