"""RabbitMQ messages/s as kombu moves them: publish N crawl-sized messages to a private priority queue through one
producer, then consume them all with one consumer (prefetch 100, acked one by one, as a worker acks a job), on the
broker at BENCH_BROKER_URL (default amqp://guest:guest@127.0.0.1:5672//). The queue is deleted at the end.

    .venv/bin/python bench/broker_rate.py [--messages 20000]

What Trawl needs of it: a job is one `run_crawl` message (plus one per extra shard), its task-sent event and the
worker's task events, so a few messages per job; at the scale in docs/scale.md "Numbers" that is far below one queue's
rate measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from kombu import Connection, Exchange, Queue

URL = os.environ.get("BENCH_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
# A crawl message's size: Celery's protocol 2 body and headers for run_crawl(job id, attempt, url=...).
BODY = [["7f1c2a3e-0000-4000-8000-000000000000", 1], {"url": "http://shop.test/list/12345"}, {}]


def measure(messages: int) -> dict:
    name = f"bench-rate-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name, queue_arguments={"x-max-priority": 9})
    with Connection(URL) as connection:
        queue(connection.default_channel).declare()
        try:
            with connection.Producer() as producer:
                started = time.perf_counter()
                for n in range(messages):
                    producer.publish(BODY, exchange=queue.exchange, routing_key=name, priority=n % 10)
                published = time.perf_counter() - started
            received = 0

            def on_message(body: object, message) -> None:
                nonlocal received
                received += 1
                message.ack()

            with connection.Consumer(queue, callbacks=[on_message], prefetch_count=100):
                started = time.perf_counter()
                while received < messages:
                    connection.drain_events(timeout=10)
                consumed = time.perf_counter() - started
        finally:
            queue(connection.default_channel).delete()
    return {
        "messages": messages,
        "publish_per_second": round(messages / published),
        "consume_per_second": round(messages / consumed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    try:
        with Connection(URL, connect_timeout=3) as probe:
            probe.ensure_connection(max_retries=1)
    except Exception as exc:  # no RabbitMQ here: `make bench` goes on with the others
        print(f"broker_rate: skipped, nothing answers at {URL.rpartition('@')[2]} ({exc})", file=sys.stderr)
        return
    row = measure(args.messages)
    print(
        f"RabbitMQ through kombu, {row['messages']:,} messages: publish {row['publish_per_second']:,}/s, "
        f"consume (ack each) {row['consume_per_second']:,}/s",
        file=sys.stderr,
    )
    print(json.dumps({"benchmark": "broker_rate", **row}))


if __name__ == "__main__":
    main()
