"""Ops keeps no model of its own: a job's stored log is crawls.models.JobLog (its table keeps the name `ops_joblog`),
kept with the jobs by crawls, which is below ops."""
