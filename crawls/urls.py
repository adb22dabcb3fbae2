from rest_framework.routers import SimpleRouter

from crawls.apis import JobViewSet
from crawls.batch_apis import BatchViewSet
from crawls.item_apis import ItemViewSet
from crawls.source_apis import SourceViewSet
from crawls.throttle_apis import ThrottleViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("batches", BatchViewSet, basename="batch")
router.register("throttles", ThrottleViewSet, basename="throttle")
router.register("sources", SourceViewSet, basename="source")
router.register("items", ItemViewSet, basename="item")

urlpatterns = router.urls
