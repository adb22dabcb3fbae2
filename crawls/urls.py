from rest_framework.routers import SimpleRouter

from crawls.apis import BatchViewSet, JobViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("batches", BatchViewSet, basename="batch")

urlpatterns = router.urls
