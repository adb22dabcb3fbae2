from rest_framework.routers import SimpleRouter

from sources.apis import SourceViewSet

router = SimpleRouter()
router.register("sources", SourceViewSet, basename="source")

urlpatterns = router.urls
