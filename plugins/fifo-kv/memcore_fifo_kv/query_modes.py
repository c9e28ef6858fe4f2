"""Query modes: an index's entry of ``Query.extras``, parsed by a pydantic model into a typed mode.

Convention (shared with the ``bm25`` index): an index reads its modes from
``Query.extras[<its kind>]`` -- ``extras["fifo"]`` for a fifo index, ``extras["sorted"]``
for a sorted index -- and ignores every other key, so one ``Query`` can carry the modes
of several indexes of a pipeline. No entry (or ``None``) is the default mode.

Each index of this plugin declares its modes as pydantic models (:class:`ModeModel`:
``extra="forbid"``, frozen, strict) and parses them with :meth:`memcore.plugin.Index.mode` in
``validate_query`` and ``search`` (once per query: the parsed mode is kept on it); a bad
mode (an unknown key inside the index's own entry, a bad value, an entry that is not a
dict) becomes a :class:`memcore.ValidationError` naming the index and the offending key
(``extras.fifo.mode``), before anything is searched.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ModeModel"]


class ModeModel(BaseModel):
    """Base of the query-mode models: unknown keys are errors, values are not coerced."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
