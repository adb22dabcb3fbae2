"""`manage.py deploy`: build a wheel from a Scrapy project and register it as a packaged version, like `shub deploy`.

`project` finds the spider class, `build` makes the wheel, `targets` talks to this installation (its services) or to
a remote one (its REST API) the same way.
"""
