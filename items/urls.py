from rest_framework.routers import SimpleRouter

from items.apis import ItemViewSet

router = SimpleRouter()
router.register("items", ItemViewSet, basename="item")

urlpatterns = router.urls
