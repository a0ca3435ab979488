"""structlog configuration: readable console lines by default, JSON lines on request.

structlog's package imports ``structlog.dev``, which imports rich (and pygments) whenever rich is
installed, for its pretty exception formatter. kcoord's log chain never reaches that formatter:
``format_exc_info`` turns an exception into plain text before the renderer sees it (and rich's
formatter would print every frame's locals, SASL secrets among them). rich is installed for the
CLI's tables, so ``kcoord serve`` imports structlog through ``import_structlog``, with rich
hidden for that one import: ~30 ms of a broker start whose budget is 0.5 s (issue 15).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import structlog

debug_enabled = False  # checked on hot paths instead of asking structlog per request


def import_structlog() -> None:
    """Import structlog without rich, unless something already imported either of them."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes `import rich` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]  # later imports of rich (the CLI's tables) work as usual


def configure_logging(fmt: str = "console", level: str = "info") -> None:
    global debug_enabled
    import structlog

    debug_enabled = level == "debug"
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
