"""Reading a batch reader's result file by file, as the tests of both readers compare them."""

from __future__ import annotations

from koordlet.system.batchread import FileKind, ReadResults


def file_values(res: ReadResults, i: int) -> dict[str, int | None] | int | None:
    """A counter's value, or a key-value file's ``{key: value-or-None}``; ``None`` if the read failed."""
    if res.status[i] != 0:
        return None
    if res.layout.kinds[i] == FileKind.COUNTER:
        return res.value(i)
    return {key: res.value(i, k) for k, key in enumerate(res.layout.keys[i])}
