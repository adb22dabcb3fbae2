"""Flower's own settings (it reads ./flowerconfig.py wherever `celery flower` starts: `make run`, docker compose).

The task list shows what each crawl is and how it went: args = [job id, attempt], kwargs = {'url': ...}, result
(a crawl's status, URL and error class, first) or exception (`CrawlFailed('failed http_4xx: <url>')`: a crawl
outside a batch that failed is FAILURE, red). Flower's default list has none of these columns.

Basic auth comes from FLOWER_BASIC_AUTH (`user:password`), read here rather than passed as `--basic-auth=...`: a
command line is readable by every user of the machine (`ps`), and the password is the admin's. Read whole: Flower's
own reading of FLOWER_* variables would split a password holding a comma.
"""

import os

tasks_columns = "name,state,args,kwargs,result,exception,runtime,worker,uuid"
if os.environ.get("FLOWER_BASIC_AUTH"):
    basic_auth = [os.environ["FLOWER_BASIC_AUTH"]]
