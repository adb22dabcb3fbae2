"""Flower's own settings (it reads ./flowerconfig.py wherever `celery flower` starts: `make run`, docker compose).

The task list shows what each crawl is and how it went: args = [job id, attempt], kwargs = {'url': ...}, result
(a crawl's status, URL and error class, first) or exception (`CrawlFailed('failed http_4xx: <url>')`: a crawl
outside a batch that failed is FAILURE, red). Flower's default list has none of these columns.
"""

tasks_columns = "name,state,args,kwargs,result,exception,runtime,worker,uuid"
