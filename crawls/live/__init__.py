"""A running job's state in Redis: its cancel flag (and its batch's) and its live numbers."""
