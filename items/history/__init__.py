"""Field-level history of items: what each change of a stored item moved, per field; which fields of a source change
on nearly every run (volatile); the values a past job stored; `item.changed` webhooks on rules over fields."""
