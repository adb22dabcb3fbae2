"""`INSERT ... ON CONFLICT` of many rows in one statement, without the ORM compiling SQL for every value.

A crawl stores its items chunk by chunk in its task thread, and that thread's Python time is taken from the crawl
itself (one GIL per process). Django's `bulk_create` spends most of a chunk's CPU building each value's SQL
(bench/README.md, 2026-11-26); here the statement is a string joined once per batch, and a value is converted
by its field only where converting does something (JSON, date-times, UUID keys). PostgreSQL and SQLite (>= 3.24)
share the syntax.

On PostgreSQL the rows go as one array per column (`INSERT … SELECT * FROM unnest(%s::bigint[], …)`) rather than as
a `VALUES` list of one placeholder per value: psycopg parses a statement's placeholders anew whenever it is too long
for its cache (2,400 for 200 items: ~14 µs of the crawl process's CPU per item), and the server parses and plans a
2,400-literal `VALUES` list for every chunk. Per item, 200-row chunks of new items: the server's CPU 42 → 31 µs, the
writer's 47 → 41 µs (bench/README.md, "Item upserts").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection, models

AS_IS = (models.CharField, models.IntegerField)  # text and integers (keys included): no conversion
PARAMS_MAX = 2**16 - 1  # PostgreSQL's bound on one statement's parameters (with server-side binding)


def rows_upsert(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    conflict: Sequence[str],
    update: Sequence[str] = (),
    returning: Sequence[str] = (),
) -> list[tuple]:
    """Insert `rows` (values in the order of `fields`); on a conflict over `conflict` set `update` from the new row,
    or, with no `update`, keep the row there. Returns the `returning` columns of every inserted or updated row
    where the database can (PostgreSQL, SQLite >= 3.35), else [].

    Unlike `bulk_create`, nothing is filled in: every column without a database default is in `fields`, text
    columns get `str` values, and Python-side defaults or `pre_save` hooks do not run. On the default database, in
    the caller's transaction."""
    if not rows:
        return []
    statement = _statement(model, tuple(fields), tuple(conflict), tuple(update), tuple(returning), connection.vendor)
    head, tail, array_types, wanted = statement
    # A statement carries at most the parameters one may bind, counted as VALUES would (one per value) either way.
    per_batch = max(1, (connection.features.max_query_params or PARAMS_MAX) // len(fields))
    adapters = [_adapter(model._meta.get_field(name)) for name in fields]
    placeholder = "(" + ", ".join(["%s"] * len(fields)) + ")"
    returned: list[tuple] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_batch):
            batch = rows[start : start + per_batch]
            if array_types:
                columns = zip(*batch, strict=True)
                params = [
                    [adapt(value) for value in values] if adapt else list(values)
                    for adapt, values in zip(adapters, columns, strict=True)
                ]
                cursor.execute(head + f"SELECT * FROM unnest({array_types})" + tail, params)
            else:
                params = [
                    adapt(value) if adapt else value
                    for row in batch
                    for adapt, value in zip(adapters, row, strict=True)
                ]
                cursor.execute(head + "VALUES " + ", ".join([placeholder] * len(batch)) + tail, params)
            if wanted:
                returned.extend(tuple(row) for row in cursor.fetchall())
    return returned


@functools.cache
def _statement(
    model: type[models.Model],
    fields: tuple[str, ...],
    conflict: tuple[str, ...],
    update: tuple[str, ...],
    returning: tuple[str, ...],
    vendor: str,
) -> tuple[str, str, str, tuple[str, ...]]:
    """The statement's head and tail, the unnest casts ("" for VALUES) and the columns returned: the same for every
    chunk a crawl stores, built once per process (and database vendor)."""
    opts, quote = model._meta, connection.ops.quote_name
    required = {f.name for f in opts.concrete_fields if not (f.primary_key or f.null or f.has_db_default())}
    if missing := required - set(fields):
        raise ValueError(f"rows_upsert into {opts.db_table} needs a value for {', '.join(sorted(missing))}")

    def column(name: str) -> str:
        return quote(opts.get_field(name).column)

    if update:
        on_conflict = "DO UPDATE SET " + ", ".join(f"{column(name)} = EXCLUDED.{column(name)}" for name in update)
    else:
        on_conflict = "DO NOTHING"
    tail = f" ON CONFLICT ({', '.join(map(column, conflict))}) {on_conflict}"
    wanted = returning if connection.features.can_return_rows_from_bulk_insert else ()
    if wanted:
        tail += " RETURNING " + ", ".join(map(column, wanted))
    head = f"INSERT INTO {quote(opts.db_table)} ({', '.join(map(column, fields))}) "
    return head, tail, _array_types(opts, fields), wanted


def _array_types(opts, fields: Sequence[str]) -> str:
    """`%s::<type>[], …` for `unnest`, one per field, on PostgreSQL; "" elsewhere, or when a column's type is unknown
    or an array itself (unnest would flatten it), so the rows go as a VALUES list."""
    if connection.vendor != "postgresql":
        return ""
    casts = []
    for name in fields:
        field = opts.get_field(name)
        db_type = field.target_field.rel_db_type(connection) if field.is_relation else field.db_type(connection)
        if not db_type or db_type.endswith("]"):
            return ""
        casts.append(f"%s::{db_type}[]")
    return ", ".join(casts)


def _adapter(field: models.Field) -> Callable[[Any], Any] | None:
    """The field's own conversion of a value for the database (JSON, date-times, UUID keys), or None for the fields
    whose values go as they are. A value seen again (the job, the tenant, the chunk's `now`) is converted once."""
    if isinstance(field.target_field if field.is_relation else field, AS_IS):
        return None
    last: list[Any] = [object(), None]

    def adapt(value: Any) -> Any:
        if value is not last[0]:
            last[:] = [value, field.get_db_prep_save(value, connection)]
        return last[1]

    return adapt
