"""What every ``rmqadmin`` command shares: the click group, the common options, running a command against an
:class:`~rmq.client.Admin`, output (table or ``--json``) and the exit code of a failure.

Exit codes (:class:`Exit`)::

    0  success
    1  any other failure (a bug, an unexpected answer)
    2  usage error: bad or missing option (click's own code)
    3  not found: topic, group, cluster, broker, message, offset, or an offline consumer group
    4  the broker or name server refused the request (its response code and remark are printed)
    5  no connection: a name server or broker unreachable, or a request timed out
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from enum import IntEnum
from typing import Any, NoReturn, TypeVar

import click
import yaml

from rmq.client.admin_ext import Admin, AdminNotFoundError
from rmq.client.config import ClientConfig
from rmq.client.errors import (
    ConsumerNotOnlineError,
    MQBrokerError,
    MQClientError,
    NoMessageError,
    NoRouteError,
    OffsetNotFoundError,
    RequestTimeoutError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rmq.remoting import RemotingError

__all__ = ["Exit", "Out", "admin_command", "cli", "exit_code_of", "human_ms", "parse_time"]

F = TypeVar("F", bound=Callable[..., Any])


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    BROKER_ERROR = 4
    CONNECTION = 5


_NOT_FOUND = (
    AdminNotFoundError,
    NoMessageError,
    NoRouteError,
    TopicNotExistError,
    SubscriptionGroupNotExistError,
    ConsumerNotOnlineError,
    OffsetNotFoundError,
)


def exit_code_of(exc: BaseException) -> Exit:
    """The exit code that says what failed (see the module doc)."""
    if isinstance(exc, _NOT_FOUND):
        return Exit.NOT_FOUND
    if isinstance(exc, MQBrokerError):
        return Exit.BROKER_ERROR
    if isinstance(exc, RemotingError | RequestTimeoutError | TimeoutError | ConnectionError | OSError):
        return Exit.CONNECTION
    if isinstance(exc, MQClientError) and exc.response_code in (10001, 10002, 10004, 10006):
        return Exit.CONNECTION
    return Exit.FAILED


class MqadminGroup(click.Group):
    """Commands found as mqadmin finds them: by name whatever its case (``topiclist`` is ``topicList``), and
    ``help CMD`` prints a command's options (``help`` alone: the list of commands)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        if cmd_name.lower() == "help":
            return _help_command(self)
        by_lower = {name.lower(): name for name in self.list_commands(ctx)}
        name = by_lower.get(cmd_name.lower())
        return super().get_command(ctx, name) if name else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command is not None else name), command, rest


def _help_command(group: click.Group) -> click.Command:
    @click.command("help", help="Print a command's options: help COMMAND (help alone: every command).")
    @click.argument("command_name", required=False)
    @click.pass_context
    def show(ctx: click.Context, command_name: str | None) -> None:
        parent = ctx.parent if ctx.parent is not None else ctx
        if not command_name:
            click.echo(group.get_help(parent))
            return
        command = group.get_command(parent, command_name)
        if command is None or command.name == "help":
            raise click.UsageError(f"no command {command_name!r}; 'help' lists them", ctx)
        with click.Context(command, info_name=command.name, parent=parent) as sub:
            click.echo(command.get_help(sub))

    return show


@click.group(
    cls=MqadminGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
)
@click.version_option(package_name="rmq", prog_name="rmqadmin")
def cli() -> None:
    """rmqadmin: administer rmq and Apache RocketMQ 4.x brokers (the commands and flags of mqadmin).

    Command names are found whatever their case; ``rmqadmin help COMMAND`` prints a command's options.
    Exit codes: 0 ok, 1 other failure, 2 usage error, 3 not found, 4 refused by the broker,
    5 no connection or timeout. A closed output pipe (``rmqadmin ... | head``) ends the command quietly.
    """


class Out:
    """Where a command writes: a table (the default) or one JSON document (``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.json = as_json

    def line(self, text: str = "") -> None:
        if not self.json:
            click.echo(text)

    def table(self, fmt: str, header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> None:
        """``fmt`` is a %-format (Java's printf columns) applied to the header and to each row."""
        if self.json:
            return
        click.echo((fmt % tuple(header)).rstrip())
        for row in rows:
            click.echo((fmt % tuple(row)).rstrip())

    def data(self, obj: Any) -> None:
        if self.json:
            click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def admin_command(name: str, help_text: str) -> Callable[[F], click.Command]:
    """A ``cli`` command whose body is ``async def body(admin, out, **options)``; adds ``-n``, ``--json`` and
    ``--timeout`` and maps failures to exit codes."""

    def deco(body: F) -> click.Command:
        @click.option(
            "-n",
            "--namesrvAddr",
            "namesrv_addr",
            envvar="NAMESRV_ADDR",
            help="Name server address list, host:port;host:port (default: $NAMESRV_ADDR).",
        )
        @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of a table.")
        @click.option(
            "--timeout",
            "timeout_ms",
            type=click.IntRange(1),
            default=5000,
            show_default=True,
            help="Timeout of each request, ms.",
        )
        @functools.wraps(body)
        def command(namesrv_addr: str | None, as_json: bool, timeout_ms: int, **options: Any) -> None:
            if not namesrv_addr:
                raise click.UsageError("no name server: give -n host:port or set NAMESRV_ADDR")
            out = Out(as_json)
            try:
                code = asyncio.run(_run(body, namesrv_addr, timeout_ms, out, options, name))
            except BrokenPipeError:
                _quiet_after_closed_pipe()
            if code:
                sys.exit(int(code))

        command.__doc__ = help_text
        return cli.command(name, help=help_text)(command)

    return deco


def _quiet_after_closed_pipe() -> NoReturn:
    """``rmqadmin ... | head``: the reader closed the pipe. Exit 0 without a word (click's own handling would
    exit 1), with stdout pointed at /dev/null so the interpreter's last flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


async def _run(
    body: Callable[..., Awaitable[None]],
    namesrv_addr: str,
    timeout_ms: int,
    out: Out,
    options: dict[str, Any],
    name: str,
) -> Exit:
    admin = Admin(namesrv_addr=namesrv_addr, timeout_ms=timeout_ms, client_config=acl_credentials())
    await admin.start()
    try:
        await body(admin, out, **options)
    except BrokenPipeError:
        raise  # the reader of our output went away: not a connection failure (see main())
    except (MQClientError, RemotingError, OSError, TimeoutError, ValueError) as exc:
        code = exit_code_of(exc) if not isinstance(exc, ValueError) else Exit.USAGE
        what = type(exc).__name__
        click.echo(f"rmqadmin {name} failed ({code.name.lower().replace('_', ' ')}): {what}: {exc}", err=True)
        return code
    finally:
        await admin.shutdown()
    return Exit.OK


def acl_credentials() -> ClientConfig | None:
    """The ACL account rmqadmin signs its requests with: ``$RMQ_ACCESS_KEY`` and ``$RMQ_SECRET_KEY``, else
    ``accessKey`` and ``secretKey`` of ``$ROCKETMQ_HOME/conf/tools.yml`` (where mqadmin reads them);
    ``None``: unsigned."""
    ak, sk = os.environ.get("RMQ_ACCESS_KEY"), os.environ.get("RMQ_SECRET_KEY")
    if not (ak and sk) and os.environ.get("ROCKETMQ_HOME"):
        path = os.path.join(os.environ["ROCKETMQ_HOME"], "conf", "tools.yml")
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except FileNotFoundError:
            data = None
        except (OSError, yaml.YAMLError) as e:
            raise click.ClickException(f"cannot read the ACL credentials of {path}: {e}") from None
        if isinstance(data, dict):
            ak, sk = str(data.get("accessKey") or ""), str(data.get("secretKey") or "")
    if not ak and not sk:
        return None
    if not ak or not sk:
        raise click.UsageError("ACL credentials need both an access key and a secret key")
    return ClientConfig(access_key=ak, secret_key=sk)


def human_ms(ms: int, *, millis: bool = True) -> str:
    """Java's ``timeMillisToHumanString2`` (``yyyy-MM-dd HH:mm:ss,SSS``, local time); '' for 0."""
    if ms <= 0:
        return ""
    t = dt.datetime.fromtimestamp(ms / 1000)
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text},{ms % 1000:03d}" if millis else text


def parse_time(text: str) -> int:
    """``now``, epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time) -> epoch ms."""
    text = text.strip()
    if text == "now":
        return int(dt.datetime.now().timestamp() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        t = dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise click.BadParameter(f"{text!r}: want now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(t.timestamp() * 1000)
