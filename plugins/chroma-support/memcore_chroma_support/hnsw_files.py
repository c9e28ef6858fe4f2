"""Checks of Chroma's HNSW segment files, made in Python before Chroma's native code reads them.

An embedded Chroma keeps each collection's vector segment in a folder named by the segment's
uuid, with four files written by its hnswlib: ``header.bin`` (sizes and counts),
``data_level0.bin`` (per element: its level-0 neighbour list, its vector, its label),
``length.bin`` (per element: its vector's norm, a float32) and ``link_lists.bin`` (per
element: the byte size of its upper-level neighbour lists, then those lists). hnswlib trusts them: an element count larger than the data, or a neighbour
id past the end, makes a search read out of bounds (a segmentation fault of the process).

:func:`check_segment` reads them with numpy and returns what is inconsistent: a header whose
sizes do not add up, files shorter than the header says, neighbour counts above ``maxM0`` /
``maxM``, neighbour ids past the element count, non-finite vectors. It cannot tell a wrong
but well-formed value (a vector changed to another finite vector, a neighbour id changed to
another valid one): those change results without crashing (see :mod:`.manifest`).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["check_segment", "check_folder", "HNSW_FILES"]

HNSW_FILES = ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin")
_HEADER = struct.Struct("<iQQQQQQiIQQQdQ")  # version, offsetLevel0, max_elements, cur_count, size_per_element,
# label_offset, offset_data, max_level, entry_point, maxM, maxM0, M, mult, ef_construction
_LIMIT = 1 << 40  # no real field comes near it: a larger value is garbage


def check_segment(folder: Path) -> list[str]:
    """Problems found in the HNSW files of one segment folder ([] when consistent)."""
    folder = Path(folder)
    where = folder.name
    paths = {name: folder / name for name in HNSW_FILES}
    missing = [name for name, p in paths.items() if not p.is_file()]
    if missing:
        return [f"{where}: {', '.join(missing)} missing"]
    raw = paths["header.bin"].read_bytes()
    if len(raw) < _HEADER.size:
        return [f"{where}/header.bin: {len(raw)} bytes, expected {_HEADER.size}"]
    (_, offset0, max_elements, count, per_element, label_offset, offset_data, max_level, entry, max_m, max_m0, m, _mult, _ef) = _HEADER.unpack_from(raw)
    if not (
        offset0 == 0
        and 0 <= count <= max_elements < _LIMIT
        and 0 < max_m0 < 65536
        and 0 < max_m <= max_m0
        and 0 < m <= max_m
        and offset_data == 4 + 4 * max_m0
        and offset_data < label_offset < per_element < _LIMIT
        and per_element == label_offset + 8
        and (label_offset - offset_data) % 4 == 0
        and -1 <= max_level < 64
    ):
        return [f"{where}/header.bin: inconsistent sizes"]
    if count and not (0 <= max_level and entry < count):
        return [f"{where}/header.bin: entry point {entry} outside {count} elements"]
    problems: list[str] = []
    size0 = paths["data_level0.bin"].stat().st_size
    if size0 < count * per_element:
        problems.append(f"{where}/data_level0.bin: {size0} bytes, {count} elements need {count * per_element}")
    size_len = paths["length.bin"].stat().st_size
    if size_len < 4 * count:
        problems.append(f"{where}/length.bin: {size_len} bytes, {count} elements need {4 * count}")
    if problems or not count:
        return problems
    dim = (label_offset - offset_data) // 4
    level0 = np.fromfile(paths["data_level0.bin"], dtype=np.uint8, count=count * per_element).reshape(count, per_element)
    links = level0[:, :offset_data].copy().view(np.uint32)  # [size header, maxM0 ids]
    sizes = links[:, 0] & 0xFFFF
    if (sizes > max_m0).any():
        problems.append(f"{where}/data_level0.bin: neighbour counts above maxM0 ({max_m0})")
    else:
        used = np.arange(max_m0)[None, :] < sizes[:, None]
        if (links[:, 1:][used] >= count).any():
            problems.append(f"{where}/data_level0.bin: neighbour ids past the {count} elements")
    vectors = level0[:, offset_data:label_offset].copy().view(np.float32)
    if vectors.shape[1] != dim or not np.isfinite(vectors).all():
        problems.append(f"{where}/data_level0.bin: non-finite vector values")
    norms = np.fromfile(paths["length.bin"], dtype=np.float32, count=count)
    if not np.isfinite(norms).all():
        problems.append(f"{where}/length.bin: non-finite vector norms")
    problems.extend(_check_upper(paths["link_lists.bin"], where, count, max_m, max(max_level, 0)))
    return problems


def _check_upper(path: Path, where: str, count: int, max_m: int, max_level: int) -> list[str]:
    """The upper-level lists: per element a uint32 byte size (levels x (4 + 4 maxM)), then the lists."""
    raw = path.read_bytes()
    per_level = 4 + 4 * max_m
    offset, starts = 0, []
    for _ in range(count):
        if offset + 4 > len(raw):
            return [f"{where}/link_lists.bin: ends before the lists of {count} elements"]
        size = int.from_bytes(raw[offset : offset + 4], "little")
        if size % per_level or size // per_level > max_level or offset + 4 + size > len(raw):
            return [f"{where}/link_lists.bin: a list size ({size} bytes) that does not fit"]
        if size:
            starts.append((offset + 4, size // per_level))
        offset += 4 + size
    if offset != len(raw):
        return [f"{where}/link_lists.bin: {len(raw) - offset} bytes past the lists of {count} elements"]
    for start, levels in starts:
        block = np.frombuffer(raw, dtype=np.uint32, count=levels * per_level // 4, offset=start).reshape(levels, per_level // 4)
        sizes = block[:, 0] & 0xFFFF
        if (sizes > max_m).any():
            return [f"{where}/link_lists.bin: neighbour counts above maxM ({max_m})"]
        if (block[:, 1:][np.arange(max_m)[None, :] < sizes[:, None]] >= count).any():
            return [f"{where}/link_lists.bin: neighbour ids past the {count} elements"]
    return []


def check_folder(folder: Path) -> list[str]:
    """Problems of every HNSW segment folder under an embedded Chroma folder."""
    out: list[str] = []
    for sub in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
        if sub.is_dir() and any((sub / name).exists() for name in HNSW_FILES):
            out.extend(check_segment(sub))
    return out
