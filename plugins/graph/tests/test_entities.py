"""Entity extraction: rule-based names and quotes, spaCy (when installed), text queries."""

from __future__ import annotations

import sys

import pytest

from memcore import ConfigError, Query, Record
from memcore.plugin import IndexContext
from memcore_graph import GraphIndexConfig, entities
from memcore_graph.entities import RuleExtractor, capitalised_phrases, load_spacy, make_extractor
from memcore_graph.index import GraphIndex
from memcore_graph.names import name_key, word_tokens

rule = RuleExtractor().extract


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Alice met Bob at Google.", ["alice", "bob", "google"]),
        ("The Bank of America opened in San Francisco", ["bank of america", "san francisco"]),
        ("Yesterday Alice and Bob went to Paris.", ["alice", "bob", "paris"]),
        ("I think we should go. What do you think?", []),
        ("What does Alice's brother do?", ["alice"]),
        ("she said \"deep work\" matters and 'flow state' too", ["deep work", "flow state"]),
        ("“Project Phoenix” starts «Monday»", ["project phoenix", "monday"]),
        ("Alice's and Bob's books", ["alice", "bob"]),  # apostrophes are not quotes
        ("Ludwig van Beethoven", ["ludwig van beethoven"]),
        ("Paris. London and Rome", ["paris", "london", "rome"]),
        ("no capitals here at all", []),
        ("NASA launched Artemis", ["nasa", "artemis"]),
        ("Alice met ALICE and alice", ["alice"]),
    ],
)
def test_rule_extraction(text, expected):
    assert rule(text) == expected


def test_capitalised_phrases_keep_surface_forms():
    assert capitalised_phrases("The University of the Arts hired Dr Jones") == ["University of the Arts", "Dr Jones"]


def test_name_keys():
    assert name_key("  Bank   of AMERICA ") == "bank of america"
    assert name_key("Alice's") == "alice"
    assert name_key("!!!") is None
    assert name_key("one two three four five six seven eight nine") is None
    assert word_tokens("Jean-Luc's café, U.S.") == ["jean", "luc", "café", "u", "s"]


def test_none_extractor_and_unknown_name():
    assert make_extractor("none", "x").extract("Alice met Bob") == []
    with pytest.raises(ConfigError, match="unknown entity_extraction"):
        make_extractor("gpt", "x")


def _index(**options):
    return GraphIndex(GraphIndexConfig(**options), IndexContext("g"))


@pytest.mark.parametrize("entity_nodes", [False, True])
def test_text_query_starts_from_records_mentioning_its_names(entity_nodes):
    index = _index(entity_nodes=entity_nodes)
    index.add(
        [
            Record.create("Alice works at Google", id="m1"),
            Record.create("Bob moved to Paris with Alice", id="m2"),
            Record.create("Carol visited Paris", id="m3"),
            Record.create("nothing to see", id="m4"),
        ]
    )
    hits = index.search(Query(text="where does alice work and is bob in paris?"), 10)
    got = {h.id: h.score for h in hits}
    # known names in the query: alice, bob, paris -> m2 matches all three, m1 one, m3 one
    assert got["m2"] == pytest.approx(1.0)
    if entity_nodes:  # m1 and m3 are also 2 hops from m2 (through alice / paris): 0.7 ** 2 > 1/3
        assert got["m1"] == pytest.approx(0.49) and got["m3"] == pytest.approx(0.49)
    else:
        assert got["m1"] == pytest.approx(1 / 3) and got["m3"] == pytest.approx(1 / 3)
    assert "m4" not in got
    assert hits[0].id == "m2"
    assert index.search(Query(text="something about nobody"), 10) == []


def test_text_query_longest_name_first():
    index = _index(entity_nodes=False)
    index.add([Record.create("Bank of America", id="bank"), Record.create("America", id="land")])
    assert [h.id for h in index.search(Query(text="the bank of america branch"), 5)] == ["bank"]
    assert [h.id for h in index.search(Query(text="america"), 5)] == ["land"]


def test_text_query_names_record_ids_and_name_field():
    index = _index(entity_nodes=False)
    index.add(
        [
            Record.create("first note", id="n1", links=["n2"]),
            Record.create("second note", id="n2"),
            Record.create("a person", id="p7", metadata={"name": "Ada Lovelace"}),
        ]
    )
    assert [(h.id, h.score) for h in index.search(Query(text="what links from n1?"), 5)] == [("n1", 1.0), ("n2", 0.7)]
    assert [h.id for h in index.search(Query(text="tell me about ada lovelace"), 5)] == ["p7"]
    plain = _index(entity_nodes=False, name_field=None)
    plain.add([Record.create("a person", id="p7", metadata={"name": "Ada Lovelace"})])
    assert plain.search(Query(text="ada lovelace"), 5) == []


def test_text_query_expands_through_entities_and_links():
    index = _index(max_depth=2)
    index.add([Record.create("Alice met Bob", id="a", links=["x"]), Record.create("Bob plays chess", id="b"), Record.create("unrelated", id="x")])
    got = {h.id: (h.score, h.raw) for h in index.search(Query(text="alice"), 10)}
    assert got == {"a": (1.0, 0.0), "x": (pytest.approx(0.7), 1.0), "b": (pytest.approx(0.49), 2.0)}


def test_entity_nodes_off_keeps_records_apart():
    index = _index(entity_nodes=False)
    index.add([Record.create("Alice met Bob", id="a"), Record.create("Bob plays chess", id="b")])
    assert index.graph.number_of_nodes() == 2 and index.graph.number_of_edges() == 0
    assert [h.id for h in index.search(Query(text="alice"), 10)] == ["a"]
    assert index.mentions("bob") == ["a", "b"] and index.entities("a") == ("alice", "bob")


def test_entity_edges_carry_default_weight_and_mentions_relation():
    index = _index(default_weight=0.25, directed=False)
    index.add([Record.create("Alice", id="a"), Record.create("Alice again", id="b", links=[{"target": "a", "relation": "follows"}])])
    assert index.graph.edges["a", ("entity", "alice")]["relations"] == {"mentions": 0.25}
    assert [h.id for h in index.search(Query(text="b", extras={"graph": {"mode": "traverse", "start": ["b"], "relations": ["follows"]}}), 5)] == ["b", "a"]
    assert [h.id for h in index.search(Query(extras={"graph": {"mode": "traverse", "start": ["b"], "relations": ["mentions"]}}), 5)] == ["b", "a"]


# -- spaCy -----------------------------------------------------------------------------------


def test_spacy_missing_is_a_config_error_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` fails, installed or not
    monkeypatch.setattr(entities, "_SPACY_CACHE", {})
    with pytest.raises(ConfigError, match=r"needs spaCy.*pip install .*memcore-graph\[spacy\]"):
        _index(entity_extraction="spacy")


def test_spacy_model_missing_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="spacy"):
        load_spacy(str(tmp_path / "no-such-pipeline"))


@pytest.fixture(scope="module")
def ruler_pipeline(tmp_path_factory):
    """A real spaCy pipeline directory: a blank English pipeline with an entity ruler (no model weights)."""
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns(
        [
            {"label": "PERSON", "pattern": [{"LOWER": "alice"}]},
            {"label": "ORG", "pattern": [{"LOWER": "acme"}, {"LOWER": "corp"}]},
            {"label": "DATE", "pattern": [{"LOWER": "monday"}]},
        ]
    )
    path = tmp_path_factory.mktemp("spacy") / "ruler"
    nlp.to_disk(path)
    return str(path)


def test_spacy_extraction_through_a_real_pipeline(ruler_pipeline):
    index = _index(entity_extraction="spacy", spacy_model=ruler_pipeline)
    index.add([Record.create("alice joined acme corp on monday", id="a"), Record.create("Bob Smith likes tea", id="b")])
    assert index.entities("a") == ("alice", "acme corp")  # DATE is not a name
    assert index.entities("b") == ()  # no capitalised-phrase rule with spaCy
    assert [h.id for h in index.search(Query(text="who works at ACME Corp?"), 5)] == ["a"]


def test_spacy_pipeline_without_entity_recognizer(tmp_path):
    spacy = pytest.importorskip("spacy")
    spacy.blank("en").to_disk(tmp_path / "blank")
    with pytest.raises(ConfigError, match="no entity recognizer"):
        load_spacy(str(tmp_path / "blank"))
