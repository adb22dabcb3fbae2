from rest_framework.routers import SimpleRouter

from throttling.apis import ThrottleViewSet

router = SimpleRouter()
router.register("throttles", ThrottleViewSet, basename="throttle")

urlpatterns = router.urls
