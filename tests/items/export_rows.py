"""Reading item exports back in tests: JSON lines, Parquet, and a JSON-lines row as its Parquet row reads."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def jsonl_rows(response) -> list[dict]:
    return [json.loads(line) for line in body(response).decode().splitlines()]


def parquet_rows(response) -> list[dict]:
    """The rows of a Parquet answer, without the nulls of fields a row does not have."""
    rows = pq.read_table(io.BytesIO(body(response))).to_pylist()
    return [{name: value for name, value in row.items() if value is not None} for row in rows]


def as_parquet_row(row: dict) -> dict:
    """A JSON-lines row as Parquet has it: `data` spread into `data.<field>`, nested values as JSON text, no nulls."""
    data = {f"data.{k}": json.dumps(v) if isinstance(v, dict | list) else v for k, v in row["data"].items()}
    flat = {**{k: v for k, v in row.items() if k != "data"}, **data}
    return {name: value for name, value in flat.items() if value is not None}
