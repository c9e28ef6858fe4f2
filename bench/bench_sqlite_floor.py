#!/usr/bin/env python
"""The floor of a row-per-record SQLite insert, to set memcore's exact insert against.

N rows (default 1M) shaped like the SQLite store's ``records`` rows (an integer key, a
unique text id, text, metadata JSON, three scope columns, two times) inserted with
``executemany`` in batches of 2,000, each committed; WAL, ``synchronous=NORMAL`` (no fsync
per batch, which memcore does); no op log, no vectors, no Python object per record beyond
the tuple bound. Prints JSON: CPU and wall seconds, CPU microseconds per record::

    python bench/bench_sqlite_floor.py 1000000
"""

import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
d = tempfile.mkdtemp(prefix="sqlite-floor-")
db = sqlite3.connect(os.path.join(d, "x.db"), isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=NORMAL")
db.execute(
    "CREATE TABLE records (n INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, text TEXT NOT NULL, metadata TEXT NOT NULL,"
    " user_id TEXT, agent_id TEXT, run_id TEXT, created_at REAL, updated_at REAL)"
)
metas = [json.dumps({"u": i % 100, "g": i % 10, "h": i % 2}) for i in range(2000)]
c0, t0 = time.process_time(), time.perf_counter()
now = time.time()
cols = "(id, text, metadata, user_id, agent_id, run_id, created_at, updated_at)"
for s in range(0, n, 2000):
    rows = [(f"r{i}", f"doc {i}", metas[i - s], None, None, None, now, now) for i in range(s, min(n, s + 2000))]
    db.execute("BEGIN")
    db.executemany(f"INSERT INTO records {cols} VALUES (?,?,?,?,?,?,?,?)", rows)
    db.execute("COMMIT")
print(
    json.dumps(
        {
            "n": n,
            "cpu_s": round(time.process_time() - c0, 2),
            "wall_s": round(time.perf_counter() - t0, 2),
            "us_per_record_cpu": round((time.process_time() - c0) / n * 1e6, 2),
        }
    )
)
db.close()
shutil.rmtree(d)
