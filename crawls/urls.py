from rest_framework.routers import SimpleRouter

from crawls.apis import JobViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")

urlpatterns = router.urls
