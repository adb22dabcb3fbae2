from rest_framework.routers import SimpleRouter

from items.apis import ItemViewSet
from items.watches import ChangeWatchViewSet

router = SimpleRouter()
router.register("items", ItemViewSet, basename="item")
router.register("item-watches", ChangeWatchViewSet, basename="item-watch")

urlpatterns = router.urls
