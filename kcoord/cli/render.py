"""Output of the inspection commands: aligned tables (rich; colour only on a terminal) or JSON
for scripts, Kafka errors as their code's name and a sentence, and the exit statuses."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import click
from rich import box
from rich.console import Console
from rich.table import Table

from kcoord.cli.admin import DEFAULT_BOOTSTRAP, BrokerUnreachable, KafkaRequestError
from kcoord.cli.reset_offsets import PlanError

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1  # a request was answered with an error code, or no broker answered
EXIT_USAGE = 2  # click's own status for usage errors

EXIT_CODES_HELP = (
    "\b\nExit status:\n"
    "  0  done\n"
    "  1  a Kafka error answered a request (its name, e.g. GROUP_ID_NOT_FOUND, is printed),\n"
    "     or no broker answered\n"
    "  2  usage error"
)

F = TypeVar("F", bound=Callable[..., Any])


class Output:
    """Where a command's results go: ``table`` (human) or ``json`` (one document on stdout)."""

    def __init__(self, fmt: str) -> None:
        self.json = fmt == "json"
        stdout = Console(highlight=False, soft_wrap=False)
        if not stdout.is_terminal:
            # Piped: no colour, and no wrapping of wide tables at an assumed 80 columns.
            stdout = Console(
                highlight=False, no_color=True, width=max(shutil.get_terminal_size().columns, 400)
            )
        self.console = stdout
        self.stderr = Console(stderr=True, highlight=False, soft_wrap=True)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
        t = Table(
            *columns,
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD if self.console.is_terminal else None,
            header_style="bold" if self.console.is_terminal else "",
            show_edge=False,
            pad_edge=False,
        )
        for row in rows:
            t.add_row(*(cell(v) for v in row))
        self.console.print(t)

    def line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def note(self, text: str) -> None:
        """Information beside the results (stderr, so that JSON on stdout stays parseable)."""
        self.stderr.print(text, markup=False)

    @contextlib.contextmanager
    def waiting(self, text: str) -> Iterator[None]:
        """A spinner on stderr while the broker works, on a terminal only (never when piped)."""
        if not self.stderr.is_terminal:
            yield
            return
        with self.stderr.status(text):
            yield

    def emit_json(self, doc: Any) -> None:
        click.echo(json.dumps(doc, indent=2, sort_keys=False))

    def kafka_error(self, e: KafkaRequestError | BrokerUnreachable) -> None:
        if isinstance(e, KafkaRequestError):
            doc = {"error": {"code": e.code, "name": e.name, "message": e.detail, "subject": e.subject}}
            text = f"Error: {e.sentence()}"
        else:
            doc = {"error": {"code": None, "name": "BROKER_UNREACHABLE", "message": str(e), "subject": None}}
            text = f"Error: {e}"
        if self.json:
            self.emit_json(doc)
        self.stderr.print(text, style="red", markup=False)


def cell(value: Any) -> str:
    """Kafka's tools print ``-`` for what is unknown or absent."""
    if value is None or value == "":
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def common_options(func: F) -> F:
    """--bootstrap-server and --output, named as Kafka's tools name them."""
    func = click.option(
        "--output",
        "-o",
        "output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Aligned tables, or JSON for scripts (stable field names).",
    )(func)
    func = click.option(
        "--bootstrap-server",
        "bootstrap",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        envvar="KCOORD_BOOTSTRAP_SERVER",
        show_envvar=True,
        metavar="HOST:PORT",
        help="The broker to connect to (any broker of the cluster).",
    )(func)
    return func


def handle_errors(func: F) -> F:
    """Kafka errors exit with status 1 after naming the error; plan errors are usage errors."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = Output(kwargs.get("output", "table"))
        try:
            return func(*args, **kwargs)
        except (KafkaRequestError, BrokerUnreachable) as e:
            out.kafka_error(e)
            click.get_current_context().exit(EXIT_KAFKA_ERROR)
        except PlanError as e:
            raise click.UsageError(str(e)) from e

    return wrapper  # type: ignore[return-value]
