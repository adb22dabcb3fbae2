"""Job logs: kept in Redis while an attempt runs, stored per attempt and shard, served as text."""
