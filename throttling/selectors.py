"""Reads over throttle rules."""

from __future__ import annotations

from django.db.models import QuerySet

from throttling.models import DomainThrottle


def domain_throttles() -> QuerySet[DomainThrottle]:
    """Every rule, by domain."""
    return DomainThrottle.objects.all()
