"""Dramatiq's RabbitMQ broker, handing back unsent messages, its queues with priorities."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import dramatiq
import pika
import pika.exceptions
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.common import current_millis, dq_name, q_name
from dramatiq.errors import ConnectionClosed

from crawler.brokers.hooks import QuickHooks
from crawler.brokers.record_transport import BATCH, READER_GONE_MS, gather, name, records_of
from crawler.brokers.returning import PUBLISH_ATTEMPTS, ReturningConsumer, middleware
from crawler.middleware import SendBack

if TYPE_CHECKING:
    from crawler.records import Record

logger = logging.getLogger(__name__)

#: The queues' ``x-max-priority``: ``--breadth-first`` messages go by depth, seeds
#: first (:func:`crawler.frontier.scope.priority`); messages without one come last.
MAX_PRIORITY = 10
#: What RabbitMQ answers a declaration that differs from the queue's: it was declared
#: before with other arguments (by a crawler from before priorities).
PRECONDITION_FAILED = 406


class ReturningRabbitmqBroker(QuickHooks, RabbitmqBroker):
    """Dramatiq's ``RabbitmqBroker``, its consumers handing back the messages
    ``send_back`` marks, its queues declared with ``MAX_PRIORITY``.

    A queue that exists without priorities is used as it is, with a warning: its
    messages go in arrival order until it is deleted (when empty) and declared anew.

    Parameters:
      send_back(SendBack): Marks the messages whose follow-ups the broker refused.
    """

    def __init__(self, *, send_back: SendBack, **parameters: Any) -> None:
        super().__init__(middleware=middleware(send_back), max_priority=MAX_PRIORITY, **parameters)
        self.send_back = send_back
        self._without_priorities: set[str] = set()

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        consumer = super().consume(queue_name, prefetch, timeout)
        return ReturningConsumer(consumer, self.send_back)

    def enqueue_all(
        self, messages: list[dramatiq.Message[Any]], delays: Mapping[str, int] | None = None
    ) -> None:
        """Publish ``messages`` together, each delayed by the milliseconds ``delays``
        holds for its id (on the delay queue, as :meth:`enqueue` puts it): return once
        RabbitMQ holds every one of them, or raise :class:`ConnectionClosed`.

        A page's links go this way before its record says they were sent.  A plain
        publish returns once the message is written to the connection, and RabbitMQ
        drops what it had not routed when it stops: the page would then be marked done
        with a link lost.  Here the links go through a transaction on a channel of
        their own (``tx.commit`` answers once the messages are on their queues, and
        persisted), one round trip a page rather than a confirm a link.  A commit whose
        answer was lost is published again on a fresh connection: the duplicates carry
        the same message ids and claims make them harmless.
        """
        if not messages:
            return
        delays = delays or {}
        if self.confirm_delivery:  # every publish waits for its confirm already
            for message in messages:
                self.enqueue(message, delay=delays.get(message.message_id))
            return
        messages = [_delayed(message, delays.get(message.message_id)) for message in messages]
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                channel = self._transaction_channel()
                for message in messages:
                    self.declare_queue(q_name(message.queue_name), ensure=True)  # and its DQ
                    self.emit_before("enqueue", message, delays.get(message.message_id))
                    channel.basic_publish(
                        exchange="",
                        routing_key=message.queue_name,
                        body=message.encode(),
                        properties=pika.BasicProperties(
                            delivery_mode=2, priority=message.options.get("broker_priority")
                        ),
                    )
                channel.tx_commit()
                break
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as e:
                del self.connection  # its channels with it: the next attempt opens new ones
                if attempt == PUBLISH_ATTEMPTS:
                    raise ConnectionClosed(e) from None
        for message in messages:
            self.emit_after("enqueue", message, delays.get(message.message_id))

    def _transaction_channel(self) -> Any:
        """This thread's channel in transaction mode, on its connection."""
        connection = self.connection
        channel = getattr(self.state, "transactions", None)
        if channel is None or not channel.is_open or channel.connection is not connection:
            channel = self.state.transactions = connection.channel()
            channel.tx_select()
        return channel

    def record_sender(self) -> ConfirmedRecordSender:
        return ConfirmedRecordSender(self.parameters)

    def declare_records(self, crawl_id: str) -> None:
        self.channel.queue_declare(
            name(crawl_id), durable=True, arguments={"x-expires": READER_GONE_MS}
        )

    def read_records(self, crawl_id: str, timeout: float) -> Generator[Record, None, None]:
        """The crawl's records for up to ``timeout`` seconds, or fewer once none is
        waiting.  A caller that stops early has the messages it read acknowledged and
        the rest back in the queue (a message of several records read in part too).

        Acknowledged in batches (:data:`BATCH`): one round trip per batch, not per
        record; once none is left, the next ones are left to gather for a moment.
        """
        deadline = time.monotonic() + timeout
        channel = self.channel
        unacknowledged = None

        def acknowledge_and_cancel() -> None:
            if unacknowledged is not None:
                channel.basic_ack(unacknowledged, multiple=True)
            channel.cancel()

        try:
            for method, _properties, body in channel.consume(
                name(crawl_id), inactivity_timeout=timeout, auto_ack=False
            ):
                if method is None:
                    break
                records = records_of(body)
                yield from records[:-1]
                # Acknowledged once its last record is read: a message read in part
                # comes back (the seeder skips the records it saw).
                unacknowledged = method.delivery_tag
                yield from records[-1:]
                if unacknowledged % BATCH == 0:
                    channel.basic_ack(unacknowledged, multiple=True)
                    unacknowledged = None
                if time.monotonic() >= deadline:
                    break
                if not channel.get_waiting_message_count():
                    gather(deadline)
        except GeneratorExit:  # the caller read all it needed; Ctrl-C and errors pass untouched
            acknowledge_and_cancel()
            raise
        acknowledge_and_cancel()

    def reconnect_reader(self) -> None:
        del self.connection

    def delete_records(self, crawl_id: str) -> None:
        self.channel.queue_delete(name(crawl_id))

    def _declare_queue(self, queue_name: str) -> Any:
        try:
            return RabbitmqBroker._declare_queue(self, queue_name)
        except pika.exceptions.ChannelClosedByBroker as e:
            return self._as_it_is(queue_name, e)

    def _declare_dq_queue(self, queue_name: str) -> Any:
        try:
            return RabbitmqBroker._declare_dq_queue(self, queue_name)
        except pika.exceptions.ChannelClosedByBroker as e:
            return self._as_it_is(dq_name(queue_name), e)

    def _as_it_is(self, name: str, error: pika.exceptions.ChannelClosedByBroker) -> Any:
        """Use the queue ``name`` as it was declared before, without priorities."""
        if error.reply_code != PRECONDITION_FAILED:
            raise error
        del self.channel  # RabbitMQ closed it
        if name not in self._without_priorities:
            self._without_priorities.add(name)
            logger.warning(
                "RabbitMQ queue %r was declared without priorities (x-max-priority): its"
                " messages go in arrival order, --breadth-first too. Delete it when it is"
                " empty (rabbitmqctl delete_queue %s) for the crawler to declare it anew.",
                name,
                name,
            )
        return self.channel.queue_declare(queue=name, durable=True, passive=True)


class ConfirmedRecordSender:
    """A worker's records to the crawl's queue, through a channel of the records' own in
    confirm mode, so that a record counts as sent only once RabbitMQ holds it.  Without
    the confirm, a record written to a connection that RabbitMQ drops (a restart) is
    lost while its message is marked done: the message's redelivery then ends as a
    duplicate and the page is missing from ``--output``.  Not thread-safe.

    Parameters:
      parameters(pika.ConnectionParameters): The broker's connection parameters.
    """

    def __init__(self, parameters: Any) -> None:
        self.parameters = parameters
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None

    def send(self, crawl_id: str, body: bytes) -> None:
        """Send ``body`` to the crawl's seeder; raise a broker error if it cannot be sent."""
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                if self._channel is None:
                    self._connection = pika.BlockingConnection(self.parameters)
                    self._channel = self._connection.channel()
                    self._channel.confirm_delivery()
                # Not mandatory: once the seeder is gone (its queue with it), RabbitMQ
                # confirms and drops the record, as the seeder wants.
                self._channel.basic_publish(
                    exchange="",
                    routing_key=name(crawl_id),
                    body=body,
                    properties=pika.BasicProperties(delivery_mode=2),
                )
                return
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as e:
                self.close()  # the next attempt opens a fresh connection and channel
                if attempt == PUBLISH_ATTEMPTS:
                    raise ConnectionClosed(e) from None

    def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()


def _delayed(message: dramatiq.Message[Any], delay: int | None) -> dramatiq.Message[Any]:
    """``message`` as Dramatiq's :meth:`RabbitmqBroker.enqueue` publishes it with
    ``delay``: on its queue's delay queue, due then."""
    if delay is None:
        return message
    eta = current_millis() + delay
    return message.copy(queue_name=dq_name(message.queue_name), options={"eta": eta})
