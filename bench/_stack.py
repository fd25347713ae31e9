"""Start and stop the production stack's pieces for the bench scripts and the slow tests.

Everything here is private to the caller: a PostgreSQL database (or a whole
throwaway cluster), a Redis database (or a throwaway redis-server), and
gunicorn / celery processes started with the same commands as
``bin/serve-production``. Every process started is stopped by its own pid.
"""

from __future__ import annotations

import http.client
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = os.environ.get("HEV_PYTHON") or sys.executable
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def production_env(*, database_url: str | None, broker_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of the production settings (DEBUG=False) for one stack."""
    # The caller's own database, broker and debug flag never reach the stack, nor
    # DJANGO_ALLOW_ASYNC_UNSAFE, which the browser tests set for the test process.
    dropped = {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        DEBUG="false",
        SECRET_KEY=env.get("SECRET_KEY") or secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        # Plain http on 127.0.0.1: no TLS terminator in front of these stacks.
        SECURE_SSL_REDIRECT="false",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    env.update(extra)
    return env


def manage(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=check, capture_output=True, text=True
    )


def recreate_postgres_database(url: str) -> None:
    """Drop and create the database the URL names (on the server the URL names)."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def prepare_site(env: dict[str, str], *, fresh: bool = True, collectstatic: bool = True) -> None:
    """A fresh database with the TIDE study open to any number of participants."""
    url = env.get("DATABASE_URL", "")
    if fresh and url.startswith("postgres"):
        recreate_postgres_database(url)
    manage("migrate", "--noinput", env=env)
    if collectstatic:
        manage("collectstatic", "--noinput", env=env)
    manage("load_study", "--open", "fixtures/tide.json", env=env)
    # The fixture recruits 150; a load test must never be turned away.
    manage("shell", "-c", "from surveys.models import Study; Study.objects.filter(slug='tide').update(target_completions=None, is_open=True)", env=env)


def http_get(base_url: str, path: str, timeout: float = 5, headers: dict[str, str] | None = None) -> tuple[int, str]:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_until(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout:.0f}s")


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def descendants_of(pid: int) -> list[int]:
    """Every process below ``pid``, parents before their children."""
    found = []
    for child in children_of(pid):
        found += [child, *descendants_of(child)]
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").replace("\0", " ")
    except FileNotFoundError:
        return ""


def stop_process(proc: subprocess.Popen | None, *, timeout: float = 20, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@dataclass
class Gunicorn:
    """gunicorn with config/gunicorn.conf.py, as bin/serve-production runs it."""

    env: dict[str, str]
    port: int
    workers: int = 0  # 0: the config's default (2 x cores + 1)
    log_path: Path | None = None
    proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 120) -> "Gunicorn":
        env = dict(self.env, GUNICORN_BIND=f"127.0.0.1:{self.port}")
        if self.workers:
            env["GUNICORN_WORKERS"] = str(self.workers)
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "config.wsgi:application", "-c", "config/gunicorn.conf.py"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        expected = self.workers or None
        try:
            wait_until(
                lambda: self.proc.poll() is None and http_get(self.base_url, "/healthz")[0] == 200
                and (expected is None or len(self.worker_pids()) >= expected),
                timeout=timeout, what=f"gunicorn on port {self.port}",
            )
        except TimeoutError:
            self.stop()
            raise
        return self

    def worker_pids(self) -> list[int]:
        return children_of(self.proc.pid) if self.proc else []

    def busy_worker_pids(self) -> list[int]:
        """Workers holding a client connection, i.e. serving a request right now.

        The sync workers of config/gunicorn.conf.py serve one request per
        connection and close it after the response (no keep-alive), so a worker
        with an accepted socket is reading, handling or answering a request.
        """
        inodes = established_socket_inodes(self.port)
        return [pid for pid in self.worker_pids() if inodes & socket_inodes_of(pid)]

    def stop(self) -> None:
        stop_process(self.proc)


def established_socket_inodes(port: int) -> set[int]:
    """Inodes of the connected sockets whose local end is ``port`` (the server side)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:  # 01: ESTABLISHED
                inodes.add(inode)
    return inodes


def socket_inodes_of(pid: int) -> set[int]:
    """Inodes of the sockets a process has open (empty if it is gone)."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except (FileNotFoundError, ProcessLookupError):  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


@dataclass
class CeleryWorker:
    env: dict[str, str]
    log_path: Path | None = None
    proc: subprocess.Popen | None = None
    name: str = "celery"  # the node name; several workers on one machine need different ones
    beat_schedule: Path | None = None  # run Celery beat in the worker (as bin/serve-production does), with this file

    def start(self) -> "CeleryWorker":
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        beat = ["--beat", "--schedule", str(self.beat_schedule)] if self.beat_schedule else []
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "config", "worker", "--concurrency=1", "--loglevel=INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{self.name}@%h", *beat],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        return self

    def kill_hard(self) -> None:
        """SIGKILL the worker's whole process tree (main process and its pool child)."""
        if self.proc is None:
            return
        for pid in [*children_of(self.proc.pid), self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        stop_process(self.proc, timeout=15)


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    if os.geteuid() != 0:
        return cmd
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(cmd)]


@dataclass
class PrivatePostgres:
    """A throwaway PostgreSQL cluster in a temporary folder (never the shared one)."""

    port: int = 5433
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hev_launch_pg_")))

    @staticmethod
    def available() -> bool:
        return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, name: str = "hev_launch") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def init(self) -> "PrivatePostgres":
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        subprocess.run(
            _as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
            check=True, capture_output=True,
        )
        return self

    def start(self) -> "PrivatePostgres":
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.directory / "log"),
                          "-o", f"'{options}'", "-w", "start"]),
            check=True, capture_output=True,
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            check=False, capture_output=True,
        )

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class PrivateRedis:
    """A throwaway redis-server (never the shared one on 6379)."""

    port: int = 6380
    proc: subprocess.Popen | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("redis-server") is not None

    def url(self, db: int = 9) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> "PrivateRedis":
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_until(self.ping, timeout=10, what=f"redis on {self.port}")
        return self

    def ping(self) -> bool:
        import redis

        return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)


@dataclass
class ServeProduction:
    """bin/serve-production itself (gunicorn + one celery worker), stopped with SIGTERM to its pid."""

    env: dict[str, str]
    port: int
    workers: int = 0
    celery: bool = True
    log_path: Path | None = None
    proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 120) -> "ServeProduction":
        env = dict(self.env, GUNICORN_BIND=f"127.0.0.1:{self.port}", SERVE_CELERY="1" if self.celery else "0",
                   HEV_PYTHON=PYTHON)
        if self.workers:
            env["GUNICORN_WORKERS"] = str(self.workers)
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen([str(ROOT / "bin" / "serve-production")], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: self.proc.poll() is None and http_get(self.base_url, "/healthz")[0] == 200,
                       timeout=timeout, what="bin/serve-production")
        except TimeoutError:
            self.stop()
            raise
        return self

    def gunicorn_master_pid(self) -> int | None:
        """gunicorn's master (below its supervisor subshell), or None while it is being started again."""
        return self._process_running("gunicorn")

    def celery_worker_pid(self) -> int | None:
        """The celery worker's main process (below its supervisor subshell), or None."""
        return self._process_running("celery")

    def _process_running(self, word: str) -> int | None:
        for pid in descendants_of(self.proc.pid) if self.proc else []:
            line = command_line(pid)
            if "-m " + word in line and "bin/serve-production" not in line:
                return pid
        return None

    def gunicorn_worker_pids(self) -> list[int]:
        master = self.gunicorn_master_pid()
        return children_of(master) if master else []

    def stop(self) -> None:
        stop_process(self.proc, timeout=40)
