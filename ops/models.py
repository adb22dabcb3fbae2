"""Ops keeps no model of its own: a job's stored log moved to crawls (crawls.models.JobLog, same table), which owns
jobs and is below ops."""
