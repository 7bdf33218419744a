"""The crawler's Dramatiq middleware, one a module, as Dramatiq's own ``middleware``
package: :class:`Recorder` (a record of every ``crawl`` message), :class:`SendBack` (a
message whose follow-ups the broker refused comes back), :class:`ReliableRetries`
(Dramatiq's ``Retries`` through it), :class:`TimeLimitOver` (the time limit ends
with the actor) and :class:`QuickRetries` (``--local``'s short backoff)."""

from crawler.middleware.quick_retries import QuickRetries
from crawler.middleware.recorder import Recorder
from crawler.middleware.reliable_retries import ReliableRetries
from crawler.middleware.send_back import SendBack
from crawler.middleware.time_limit_over import TimeLimitOver

__all__ = ["QuickRetries", "Recorder", "ReliableRetries", "SendBack", "TimeLimitOver"]
