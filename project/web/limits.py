"""Refuse request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE before anything reads them.

Django enforces that limit only when `request.body`/`request.POST` are read; DRF's JSON parser reads the stream
directly and would take a body of any size. A declared length over the limit is 413 for every view.
"""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse


class BodySizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and request.content_type == "multipart/form-data":
            # Uploaded files stream to disk; a scraper package may take up to its own limit beside the form fields.
            limit += settings.TRAWL_PACKAGE_MAX_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Content-Length is not a number."}, status=400)
        if limit is not None and length > limit:
            return JsonResponse({"detail": f"Request body over {limit} bytes."}, status=413)
        return self.get_response(request)
