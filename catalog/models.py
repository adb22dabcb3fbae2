"""Our own categories, and the external category names sites use, mapped onto them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Category(models.Model):
    name = models.CharField(max_length=200, unique=True)
    keywords = models.TextField(
        blank=True, help_text="Keywords and synonyms, comma- or newline-separated: they help the automatic mapping."
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return self.name

    @property
    def terms(self) -> list[str]:
        """The name and each keyword: what an external name is compared with."""
        keywords = [part.strip() for part in self.keywords.replace("\n", ",").split(",")]
        return [self.name, *[keyword for keyword in keywords if keyword]]


class MapStatus(models.TextChoices):
    UNMAPPED = "unmapped", "Unmapped (waits for a human)"
    AUTO = "auto", "Mapped automatically"
    CONFIRMED = "confirmed", "Confirmed by a human"


class CategoryMap(models.Model):
    """One external category name (as items carry it in `category`) and the category it means to us."""

    external_name = models.CharField(max_length=300, unique=True)
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="maps")
    score = models.FloatField(null=True, blank=True, help_text="The classifier's similarity (0..1) when it last ran.")
    status = models.CharField(max_length=10, choices=MapStatus.choices, default=MapStatus.UNMAPPED, db_index=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["status", "external_name"]

    def __str__(self) -> str:
        return f"{self.external_name} → {self.category or '?'}"
