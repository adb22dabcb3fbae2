"""Webhook deliveries land here (see the batches and webhooks work)."""
