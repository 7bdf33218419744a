"""The crawler's Dramatiq middleware, one a module, as Dramatiq's own ``middleware``
package: :class:`Recorder` (a record of every ``crawl`` message), :class:`SendBack` (a
message whose follow-ups the broker refused comes back), :class:`ReliableRetries`
(Dramatiq's ``Retries`` through it) and :class:`TimeLimitOver` (the time limit ends
with the actor)."""

from crawler.middleware.recorder import Recorder
from crawler.middleware.reliable_retries import ReliableRetries
from crawler.middleware.send_back import SendBack
from crawler.middleware.time_limit_over import TimeLimitOver

__all__ = ["Recorder", "ReliableRetries", "SendBack", "TimeLimitOver"]
