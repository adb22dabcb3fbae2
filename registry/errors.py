"""The registry's refusal: every offending field named at once, as a 400 body like DRF's."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from project.errors import TrawlError


class RegistryError(TrawlError):
    """A registry write refused before anything changed. `errors` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = {field: list(messages) for field, messages in errors.items()}
        message = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in self.errors.items())
        super().__init__(message, field=next(iter(self.errors)))

    def as_dict(self) -> dict:
        return self.errors

    @classmethod
    def from_validation_error(cls, exc: ValidationError, *, non_field: str = "detail") -> RegistryError:
        errors = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        return cls({(non_field if field == NON_FIELD_ERRORS else field): msgs for field, msgs in errors.items()})
