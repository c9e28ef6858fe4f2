"""``memcore.plugin.query_mode``: the one parser of an index's namespaced query mode."""

from __future__ import annotations

from typing import Annotated, Literal, Union

import pytest
from pydantic import BaseModel, ConfigDict, Field

from memcore import ValidationError
from memcore.plugin import query_mode


class Probe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    nprobe: int = Field(1, gt=0)


class Newest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["newest"] = "newest"


class Range(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["range"]
    gte: float


Mode = Annotated[Union[Newest, Range], Field(discriminator="mode")]


def test_absent_or_none_is_none_and_other_keys_are_ignored():
    assert query_mode(None, "faiss", Probe, "v") is None
    assert query_mode({}, "faiss", Probe, "v") is None
    assert query_mode({"faiss": None, "graph": {"anything": 1}}, "faiss", Probe, "v") is None


def test_a_dict_is_validated_and_a_model_instance_passes_through():
    assert query_mode({"faiss": {"nprobe": 4}}, "faiss", Probe, "v") == Probe(nprobe=4)
    given = Probe(nprobe=2)
    assert query_mode({"faiss": given}, "faiss", Probe, "v") is given


@pytest.mark.parametrize(
    "value, match",
    [
        ({"nprobe": 0}, r"index 'v'.*extras\.faiss\.nprobe"),
        ({"nprob": 3}, r"extras\.faiss\.nprob.*nprobe"),
        (7, r"index 'v'.*extras\['faiss'\]|dict"),
        (["nprobe"], r"dict"),
    ],
)
def test_bad_modes_are_validation_errors_naming_the_field(value, match):
    with pytest.raises(ValidationError, match=match):
        query_mode({"faiss": value}, "faiss", Probe, "v")


def test_defaults_fill_an_absent_mode_and_missing_fields():
    assert query_mode({}, "fifo", Mode, "q", defaults={"mode": "newest"}) == Newest()
    assert query_mode({"fifo": {}}, "fifo", Mode, "q", defaults={"mode": "newest"}) == Newest()
    assert query_mode({"fifo": {"mode": "range", "gte": 2}}, "fifo", Mode, "q", defaults={"mode": "newest"}) == Range(mode="range", gte=2.0)


def test_an_unknown_tag_lists_the_modes():
    with pytest.raises(ValidationError, match=r"newest.*range|range.*newest"):
        query_mode({"fifo": {"mode": "oldest"}}, "fifo", Mode, "q", defaults={"mode": "newest"})


def test_a_wrong_field_of_one_mode_names_that_modes_fields():
    with pytest.raises(ValidationError, match=r"extras\.fifo\.lte.*'range'.*gte"):
        query_mode({"fifo": {"mode": "range", "gte": 1, "lte": 3}}, "fifo", Mode, "q", defaults={"mode": "newest"})


def test_label_changes_how_the_index_is_named():
    with pytest.raises(ValidationError, match=r"^graph index 'g'"):
        query_mode({"graph": {"nprobe": -1}}, "graph", Probe, "g", label="graph index 'g'")
