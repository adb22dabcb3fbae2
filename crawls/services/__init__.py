from crawls.services.execution import job_execute
from crawls.services.items import items_upsert
from crawls.services.jobs import job_cancel, job_claim, job_create, job_finish, job_publish

__all__ = ("items_upsert", "job_cancel", "job_claim", "job_create", "job_execute", "job_finish", "job_publish")
