"""Item exports as Parquet, streamed: row groups written to the response as rows come, never the whole table held.

Schema rule (docs/ingestion.md, "Exports"): one column per top-level field of the JSON-lines row, except `data`, whose
fields each become a `data.<field>` column (as in the CSV export), in first-seen order. A column's type comes from its
non-null values across every row: all booleans → bool, all integers (within int64) → int64, numbers → float64,
anything else → string, where a string stays as it is and any other value (an object, a list, a number among text)
is written as JSON. A row without a field has null there. The types are known before the first row group is written,
so the rows are read twice: once for the schema, once to write them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
BATCH_ROWS = 1000  # rows per row group at most
BATCH_BYTES = 16 * 1024 * 1024  # text per row group at most (about): 1,000 articles would otherwise be a gigabyte
INT64 = range(-(2**63), 2**63)
TYPES = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}


def parquet_chunks(rows: Callable[[], Iterator[dict[str, Any]]], *, columns: Sequence[str]) -> Iterator[bytes]:
    """The Parquet file of the rows `rows()` yields (called twice), in pieces of one row group or so each. `columns`
    come first and are there even with no row."""
    kinds: dict[str, set[str]] = {name: set() for name in columns}
    for row in rows():
        for name, value in flat(row).items():
            kinds.setdefault(name, set()).add(kind_of(value))
    schema = pa.schema([(name, TYPES[column_type(found)]) for name, found in kinds.items()])
    sink = Drain()
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for batch in batches(rows(), schema):
            writer.write_batch(batch)
            yield sink.take()
    yield sink.take()


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """The row's fields with `data`'s spread out as `data.<field>`."""
    out = {name: value for name, value in row.items() if name != "data"}
    data = row.get("data")
    if isinstance(data, dict):
        out.update({f"data.{name}": value for name, value in data.items()})
    elif data is not None:
        out["data"] = data
    return out


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if value in INT64 else "other"
    if isinstance(value, float):
        return "float"
    return "str" if isinstance(value, str) else "other"


def column_type(kinds: set[str]) -> str:
    kinds = kinds - {"null"}
    if kinds in ({"bool"}, {"int"}, {"float"}):
        return next(iter(kinds))
    return "float" if kinds == {"int", "float"} else "str"


def batches(rows: Iterator[dict[str, Any]], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    count = size = 0
    for row in rows:
        cells = flat(row)
        for field in schema:
            value = cell(cells.get(field.name), field.type)
            columns[field.name].append(value)
            size += len(value) if isinstance(value, str) else 8
        count += 1
        if count >= BATCH_ROWS or size >= BATCH_BYTES:
            yield pa.RecordBatch.from_pydict(columns, schema=schema)
            columns = {name: [] for name in schema.names}
            count = size = 0
    if count:
        yield pa.RecordBatch.from_pydict(columns, schema=schema)


def cell(value: Any, column: pa.DataType) -> Any:
    if value is None:
        return None
    if column == pa.string():
        return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return float(value) if column == pa.float64() else value


class Drain:
    """The writer's file: keeps what it writes until the response takes it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        piece = bytes(data)
        self.parts.append(piece)
        self.position += len(piece)
        return len(piece)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        taken, self.parts = b"".join(self.parts), []
        return taken
