"""structlog configuration: readable console lines by default, JSON lines on request."""

from __future__ import annotations

import logging
import sys

import structlog

debug_enabled = False  # checked on hot paths instead of asking structlog per request


def configure_logging(fmt: str = "console", level: str = "info") -> None:
    global debug_enabled
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
