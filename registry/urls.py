from rest_framework.routers import SimpleRouter

from registry.apis import SCRAPER_NAME, ScraperViewSet, VersionViewSet

router = SimpleRouter()
router.register("scrapers", ScraperViewSet, basename="scraper")
router.register(rf"scrapers/(?P<scraper_name>{SCRAPER_NAME})/versions", VersionViewSet, basename="scraper-version")

urlpatterns = router.urls
