"""REST API for `item.changed` watches (`/api/item-watches/`): a requester opts in to events about its own items
(or, an admin, about one source's items), with rules on fields (items/history/rules.py) and a target URL."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from items.history.rules import rules_check
from items.models import ChangeWatch
from items.selectors import change_watches_of, watchable_sources
from items.services import change_watch_create
from project.web.query import QueryChecked, QueryParams
from project.web.serializers import http_url


class ChangeWatchSerializer(serializers.ModelSerializer):
    target_url = serializers.URLField(max_length=2000, validators=[http_url])
    source = serializers.PrimaryKeyRelatedField(
        queryset=watchable_sources(),
        required=False,
        allow_null=True,
        help_text="Only this source's items (admins only); none: every item of yours.",
    )
    rules = serializers.JSONField(help_text='e.g. [{"field": "price", "drop_pct": 5}, {"field": "title"}]')

    class Meta:
        model = ChangeWatch
        fields = ("id", "source", "target_url", "rules", "enabled", "created_at")
        read_only_fields = ("id", "created_at")

    def validate_rules(self, rules):
        try:
            return rules_check(rules)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


WATCH_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The watch's id.")


@extend_schema_view(retrieve=extend_schema(parameters=[WATCH_ID]), destroy=extend_schema(parameters=[WATCH_ID]))
class ChangeWatchViewSet(
    QueryChecked,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your `item.changed` watches. Each item a job changed that meets one of a watch's rules is one signed event
    to its `target_url`, sent once the job's items are stored (docs/webhooks.md)."""

    serializer_class = ChangeWatchSerializer
    lookup_value_regex = "[0-9]+"
    query_params = {"list": QueryParams}

    def get_queryset(self) -> QuerySet[ChangeWatch]:
        return change_watches_of(requester=self.request.user)

    def create(self, request: Request) -> Response:
        """Opt in to `item.changed` events."""
        spec = ChangeWatchSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        watch = change_watch_create(requester=request.user, **spec.validated_data)
        return Response(ChangeWatchSerializer(watch).data, status=status.HTTP_201_CREATED)
