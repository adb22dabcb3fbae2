"""Celery messages: the transport and its priorities, the one send point, kombu work-arounds."""
