"""A crawl host's tasks claim in the order their messages came (project.pools.turns), whichever thread runs first."""

from __future__ import annotations

import threading
import time

from project.pools.turns import Turns


def test_claims_go_in_ticket_order_whatever_order_the_threads_start_in():
    turns, claimed = Turns(), []
    tickets = [turns.issue() for _ in range(8)]

    def claim(ticket: int) -> None:
        assert turns.wait(ticket, timeout=60)
        claimed.append(ticket)
        turns.done(ticket)

    threads = [threading.Thread(target=claim, args=(ticket,)) for ticket in reversed(tickets)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)  # the latest ticket's thread is well on its way before the first one starts
    for thread in threads:
        thread.join(60)

    assert claimed == tickets


def test_a_task_that_ends_without_claiming_holds_no_later_one():
    turns = Turns()
    first, second = turns.issue(), turns.issue()
    turns.done(first)  # its job was not there to claim, say
    turns.done(first)  # and its thread's end says so again

    waited = threading.Event()
    thread = threading.Thread(target=lambda: (turns.wait(second, timeout=60), waited.set()))
    thread.start()
    thread.join(60)
    assert waited.is_set()


def test_a_claim_that_never_ends_holds_the_next_one_only_for_the_bound_and_no_later_one_at_all():
    turns = Turns()
    stuck = turns.issue()  # claimed, and stuck
    second, third = turns.issue(), turns.issue()
    assert turns.wait(second, timeout=0.2) is False
    turns.done(second)

    assert turns.wait(third, timeout=60) is True, "the third waited for the stuck one too"
    turns.done(stuck)  # ends at last: changes nothing
    assert turns.issue() == 3
