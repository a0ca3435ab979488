"""A throwaway PostgreSQL server for change-data-capture tests (Debian's ``postgresql`` 15).

``postgres_server()`` runs initdb into a fresh directory with wal_level=logical and starts it with
pg_ctl on a free port (TCP on 127.0.0.1, password auth for the ``postgres`` superuser, password
``postgres``). PostgreSQL refuses to run as root; as root it runs as the ``postgres`` user.
Raises ``PostgresUnavailable`` (tests skip on it) when initdb/pg_ctl or that user are missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.harness import free_port

PASSWORD = "postgres"


class PostgresUnavailable(RuntimeError):
    pass


def _bin(name: str) -> str:
    exe = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)
    if exe is None:
        raise PostgresUnavailable(f"{name} not found (Debian package postgresql)")
    return exe


@dataclass
class Postgres:
    port: int
    data_dir: Path
    _as: list[str]

    def psql(self, sql: str) -> str:
        out = subprocess.run(
            [
                _bin("psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PGPASSWORD": PASSWORD},
        )
        assert out.returncode == 0, f"psql {sql!r}: {out.stderr}"
        return out.stdout


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    run_as: list[str] = []
    top = Path(tempfile.mkdtemp(prefix="kcoord-pg-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root and there is no postgres user") from None
        runuser = shutil.which("runuser")
        if runuser is None:
            raise PostgresUnavailable("running as root and runuser is missing")
        run_as = [runuser, "-u", "postgres", "--"]
        os.chown(top, user.pw_uid, user.pw_gid)
    data = top / "data"
    pwfile = top / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if run_as:
        os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
    try:
        subprocess.run(
            [
                *run_as,
                initdb,
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        port = free_port()
        opts = (
            f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={top} "
            "-c wal_level=logical -c max_wal_senders=4 -c max_replication_slots=4 -c fsync=off"
        )
        subprocess.run(
            [
                *run_as,
                pg_ctl,
                "-D",
                str(data),
                "-l",
                str(top / "server.log"),
                "-o",
                opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=90,
        )
        try:
            yield Postgres(port, data, run_as)
        finally:
            subprocess.run(
                [*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(top, ignore_errors=True)
