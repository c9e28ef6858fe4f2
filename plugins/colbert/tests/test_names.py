"""Index names of the server and passage ids."""

from __future__ import annotations

import pytest

from memcore import ValidationError
from memcore_colbert.names import check_index_name, check_pid, index_name
from memcore_colbert.served import parse_tsv


def test_multi_tenant_names():
    assert index_name("ws1", "kb-2", "chunks") == "ws1_kb-2_chunks"
    assert check_index_name("ws1_kb1_chunks") == "ws1_kb1_chunks"
    for bad in [("ws_1", "kb", "t"), ("../x", "kb", "t"), ("ws", "", "t"), ("ws", "kb", "a/b"), ("ws", "kb", "t.json")]:
        with pytest.raises(ValidationError):
            index_name(*bad)
    for bad in ["..", "../x", "a/b", "a\\b", ".x", "x.y", "", "-x", "x" * 129, None, 5, "ä"]:
        with pytest.raises(ValidationError):
            check_index_name(bad)


def test_pids_and_tsv():
    assert check_pid("doc1_chunk1", "w") == "doc1_chunk1"
    for bad in ["", "a\tb", "a\nb", None, "x" * 513]:
        with pytest.raises(ValidationError):
            check_pid(bad, "w")
    assert parse_tsv("a\tone\r\n\nb\ttwo\tthree\n", 10) == [("a", "one"), ("b", "two\tthree")]
    with pytest.raises(ValidationError, match="more than 1 passages"):
        parse_tsv("a\tx\nb\ty\n", 1)
    with pytest.raises(ValidationError, match="must be a string"):
        parse_tsv(["a\tx"], 10)
