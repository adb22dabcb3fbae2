"""The machine's PostgreSQL for tests that make databases of their own on it (the benches' smoke runs)."""

from __future__ import annotations

SERVER = "postgres://postgres@127.0.0.1:5432"


def postgres_answers(server: str = SERVER) -> bool:
    try:
        import psycopg

        with psycopg.connect(f"{server}/postgres", connect_timeout=3):
            return True
    except Exception:
        return False
