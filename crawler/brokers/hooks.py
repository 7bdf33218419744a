"""Every broker's middleware hooks, called as Dramatiq calls them but only where a
middleware has them: :class:`QuickHooks`."""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.middleware import Middleware, MiddlewareError


class QuickHooks(dramatiq.Broker):
    """Dramatiq's ``emit_before`` and ``emit_after``, in the same order and with the same
    failures (a ``MiddlewareError`` such as ``SkipMessage`` raised from a ``before_``
    hook, any other failure logged), calling only the middleware whose class has the
    hook of its own rather than the base class's no-op.

    A page sends each of its links (an ``enqueue``: two hooks each) and is processed and
    acknowledged (six more): with a dozen middleware, most having none of these hooks,
    Dramatiq's broker makes some three hundred calls a page that do nothing.  The hooks
    of each signal are found once, and again when a middleware is added."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: Each signal's hooks, found on its first emit (a broker made with no
        #: middleware at all has them too: none).
        self._hooks: dict[str, list[tuple[Middleware, Any]]] = {}
        super().__init__(*args, **kwargs)

    def add_middleware(
        self,
        middleware: Middleware,
        *,
        before: type[Middleware] | None = None,
        after: type[Middleware] | None = None,
    ) -> None:
        super().add_middleware(middleware, before=before, after=after)
        self._hooks = {}

    def emit_before(self, signal: str, *args: Any, **kwargs: Any) -> None:
        signal = "before_" + signal
        for middleware, hook in self._hooks_of(signal):
            try:
                hook(self, *args, **kwargs)
            except MiddlewareError:
                raise
            except Exception:
                self.logger.critical(
                    "Unexpected failure in %s of %r.", signal, middleware, exc_info=True
                )

    def emit_after(self, signal: str, *args: Any, **kwargs: Any) -> None:
        signal = "after_" + signal
        for middleware, hook in reversed(self._hooks_of(signal)):
            try:
                hook(self, *args, **kwargs)
            except Exception:
                self.logger.critical(
                    "Unexpected failure in %s of %r.", signal, middleware, exc_info=True
                )

    def _hooks_of(self, signal: str) -> list[tuple[Middleware, Any]]:
        """The middleware with a hook for ``signal`` of their own, in the stack's order,
        and their hooks."""
        hooks = self._hooks.get(signal)
        if hooks is None:
            nothing = getattr(Middleware, signal, None)
            hooks = [
                (middleware, hook)
                for middleware in self.middleware
                if (hook := getattr(middleware, signal)) is not None
                and (nothing is None or getattr(hook, "__func__", None) is not nothing)
            ]
            self._hooks[signal] = hooks
        return hooks
