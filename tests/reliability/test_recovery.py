"""Issue 13: a kill during flush/close recovers from the last complete save plus the log.

Before, a save deleted the manifest first, so a kill mid-save forced a full rebuild (5-14 s
at 45k records). Now the previous save is kept as hard links in ``.previous/`` until the
new one is complete; the next open loads it and applies only the logged ops since.
"""

from __future__ import annotations

import json

import pytest

import memcore
from memcore._util.log import configure_logging

from .conftest import settings, vec


@pytest.mark.parametrize("index", ["exact", "flat"])
def test_kill_during_save_loads_the_previous_save_and_catches_up(directory, index, capsys):
    memory = memcore.open(settings(), path=directory)
    c = memory.collection
    c.insert([{"id": f"a{i}", "text": f"a{i}", "vectors": {"v": vec(i)}} for i in range(50)])
    c.flush()
    c.insert([{"id": f"b{i}", "text": f"b{i}", "vectors": {"v": vec(100 + i)}} for i in range(20)])
    c.delete("a3")
    handle = c._indexes[index]
    folder = handle.directory

    def dies_mid_save(target):
        for path in target.iterdir():  # half the new files written over the old names...
            if path.is_file() and path.name != "index.json":
                (target / ".tmp").write_bytes(b"partial")
                (target / ".tmp").replace(path)
                break
        raise KeyboardInterrupt("killed during save")  # ...then the process dies

    handle.index.save = dies_mid_save
    with pytest.raises(KeyboardInterrupt):
        c.flush()
    c.store.close()  # the process is gone: no further save, the lock is released

    configure_logging("json")
    try:
        with memcore.open(settings(), path=directory) as again:
            events = [json.loads(l) for l in capsys.readouterr().err.splitlines() if l.startswith("{")]
            assert not [e for e in events if e["event"] == "index.rebuilt" and e["name"] == index]
            assert [e for e in events if e["event"] == "index.recovered_previous" and e["name"] == index]
            ca = again.collection
            assert ca._indexes[index].loaded_from_disk
            assert len(ca.index(index)) == 69
            assert ca.retrieve({"vectors": {"v": vec(105)}}, index=index, k=1)[0].id == "b5"
            assert "a3" not in {h.id for h in ca.retrieve({"vectors": {"v": vec(3)}}, index=index, k=5)}
    finally:
        configure_logging("off")
    with memcore.open(settings(), path=directory) as third:  # the repaired save loads directly
        assert third.collection._indexes[index].loaded_from_disk
        assert len(third.collection.index(index)) == 69
    assert not (folder / ".previous").exists()
