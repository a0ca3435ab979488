"""The ``kcoord`` command: ``serve`` plus inspection commands.

``groups`` and ``topics`` (groups.py, topics.py) are Kafka clients: they speak the Kafka
protocol to any broker and import nothing of kcoord's broker. ``serve`` takes every
:class:`~kcoord.config.BrokerConfig` setting as a flag (Kafka's name with dots as dashes), as a
``KCOORD_*`` environment variable, or from ``--config FILE`` (TOML).
"""

from __future__ import annotations

import gc
import importlib
import os
import types
import typing
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from pydantic import ValidationError

from kcoord.config import ENV_PREFIX, BrokerConfig, build_config, kafka_name, load_toml


def _click_type(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _click_type(args[0])
    if origin is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(annotation)])
    if annotation is bool:
        return click.BOOL
    if annotation is int:
        return click.INT
    if annotation is float:
        return click.FLOAT
    return click.STRING


def _config_options(func: Any) -> Any:
    """Add one option per BrokerConfig field; help shows the Kafka name and default."""
    for name, info in reversed(list(BrokerConfig.model_fields.items())):
        kname = kafka_name(name)
        default = info.default
        shown = (
            "(none)" if default is None else str(default).lower() if isinstance(default, bool) else default
        )
        func = click.option(
            "--" + kname.replace(".", "-"),
            name,
            type=_click_type(info.annotation),
            default=None,
            envvar=ENV_PREFIX + name.upper(),
            show_envvar=True,
            help=f"{kname}: {info.description} [default: {shown}]",
        )(func)
    return func


class LazyGroup(click.Group):
    """Subcommands named by "module:attribute", imported when run or listed: ``kcoord serve``
    does not load the admin clients' modules (kafka-python's admin, rich tables), which took
    about a fifth of the broker's start."""

    def __init__(self, *args: Any, lazy_subcommands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_subcommands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(
    cls=LazyGroup,
    lazy_subcommands={"groups": "kcoord.cli.groups:groups", "topics": "kcoord.cli.topics:topics"},
)
@click.version_option(package_name="kcoord")
def main() -> None:
    """kcoord: a lightweight Kafka-compatible coordination broker."""


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar=ENV_PREFIX + "CONFIG",
    help="TOML file of settings under Kafka's names.",
)
@click.option(
    "--log-format",
    type=click.Choice(["console", "json"]),
    default="console",
    envvar=ENV_PREFIX + "LOG_FORMAT",
    show_default=True,
    help="Broker log output format.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    envvar=ENV_PREFIX + "LOG_LEVEL",
    show_default=True,
)
@_config_options
def serve(config_file: Path | None, log_format: str, log_level: str, **settings: Any) -> None:
    """Run the broker (default: PLAINTEXT://127.0.0.1:9092, data in ./kcoord-data)."""
    ctx = click.get_current_context()
    overrides = {
        k: v
        for k, v in settings.items()
        if v is not None
        and ctx.get_parameter_source(k) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
    # Click skips an empty environment variable; for a text setting the empty value means something
    # (KCOORD_HTTP_LISTENERS= turns the HTTP endpoint off), so it is taken as the empty string.
    for k in settings:
        text = _click_type(BrokerConfig.model_fields[k].annotation) is click.STRING
        if text and k not in overrides and os.environ.get(ENV_PREFIX + k.upper()) == "":
            overrides[k] = ""
    try:
        file_values = load_toml(config_file) if config_file else {}
        config = build_config(file_values, overrides)
    except (ValidationError, ValueError, OSError) as e:
        raise click.UsageError(f"invalid configuration: {e}") from e

    # What the broker imports lives as long as the process: the cyclic collector's passes over
    # it while importing (and the full pass that would later move it out of sight) were ~60 ms
    # of a start whose budget is 0.5 s (issue 15). The imports leave 5 unreachable objects behind.
    gc.disable()
    from kcoord.protocol.kafka_package import defer_package_init

    defer_package_init()  # the broker uses kafka-python's codecs, not its clients
    from kcoord.logsetup import configure_logging, import_structlog

    import_structlog()  # before the broker's modules import it: without rich
    from kcoord.protocol.fields import RecordFormatError
    from kcoord.server.app import run_broker

    gc.freeze()
    gc.enable()

    configure_logging(log_format, log_level)
    try:
        status = run_broker(config)
    except RecordFormatError as e:
        # A coordinator log that does not decode: serving would answer from a state that lacks
        # what the log holds (committed offsets among it), so the broker stops and says where.
        raise click.ClickException(
            f"{e}. The log is left as it is: `kcoord log-dump --records <its directory>` shows it."
        ) from e
    if status:  # a coordinator write failed: the broker stopped (its log says why)
        raise SystemExit(status)


@main.command("log-dump")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--records/--no-records", default=False, help="Also decode every record.")
def log_dump(path: Path, records: bool) -> None:
    """Print the record batches of a segment file or partition directory (with a progress bar
    on a terminal; none when piped)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from kcoord.storage.dump import dump_path, segment_files

    console = Console(highlight=False)
    if not console.is_terminal:
        for line in dump_path(path, records_too=records):
            click.echo(line)
        return
    total = sum(f.stat().st_size for f in segment_files(path))
    columns = (TextColumn("reading"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("log-dump", total=total)
        for line in dump_path(path, records_too=records, progress=lambda n: bar.advance(task, n)):
            console.print(line, markup=False, soft_wrap=True)


if __name__ == "__main__":
    main()
