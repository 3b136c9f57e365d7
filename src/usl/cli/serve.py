"""`usl serve`: the web page and its JSON API.

On a fresh data directory the default benchmark is imported first (from ``../shared/data`` when it
is there, else downloaded from AlpacaEval's GitHub) and its topics are built, with progress on the
terminal, so that ``usl serve`` alone gives a working leaderboard.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Callable, List, Optional

import typer

from usl import paths
from usl.cli.common import JUDGE_EPILOG, user_errors
from usl.server.heap import limit_heaps
from usl.types import DataError

log = logging.getLogger(__name__)


def register(app: typer.Typer) -> None:
    @app.command("serve", epilog=JUDGE_EPILOG)
    def serve(ctx: typer.Context,
              host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
              port: int = typer.Option(8000, "--port", help="TCP port."),
              benchmark: str = typer.Option("alpaca_eval", "--benchmark", help="Benchmark shown by default."),
              judge: Optional[List[str]] = typer.Option(
                  None, "--judge", help="Judge the page may use; repeat to allow several, the first is the "
                                        "default. Default: default, plus crm-factored (the transformer CRM "
                                        "from answer vectors shipped for the default benchmark) on the "
                                        "default benchmark. Forms below."),
              refine_with: str = typer.Option("crm", "--refine-with",
                                              help="Reference judge the page can refine a board with (the "
                                                   "transformer CRM: a few seconds a question on a CPU, judged "
                                                   "on request and cached); 'none' turns refinement off."),
              workers: int = typer.Option(2, "--workers", help="Threads that rank leaderboards."),
              allow_host: Optional[List[str]] = typer.Option(
                  None, "--allow-host", help="A host name requests may use besides loopback and the --host "
                                             "address (behind a proxy or on a LAN); repeat for several; '*': any."),
              allow_origin: Optional[List[str]] = typer.Option(
                  None, "--allow-origin", help="Another origin (scheme://host:port) whose pages may call the API."),
              token: Optional[str] = typer.Option(
                  None, "--token", envvar="USL_TOKEN", show_envvar=True,
                  help="Require this token on the API (Authorization: Bearer TOKEN; the page: open /?token=TOKEN)."),
              no_import: bool = typer.Option(False, "--no-import", help="Do not import the default benchmark "
                                                                         "or build topics on first start.")) -> None:
        """Serve the leaderboard page and API (open the printed URL)."""
        limit_heaps()     # before any thread starts: two C heaps, not eight a core (usl.server.heap)
        from usl.leaderboard.service import LeaderboardService
        from usl.server.app import ServerConfig, create_app
        from usl.judges.redact import public_judge
        from usl.server.hosts import Access, exposure_warning
        from usl.server.limits import uvicorn_config

        with user_errors():
            store = ctx.obj.store()
            if not no_import:
                ensure_benchmark(store, benchmark, ctx.obj.home)
            service = LeaderboardService(store, home=ctx.obj.home)
            reference = "" if refine_with.strip().lower() in ("", "none", "off") else refine_with.strip()
            if reference:
                from usl.judges.registry import load_judge

                load_judge(reference, home=ctx.obj.home)   # a wrong spec fails here, not on first use
            access = Access(bind=host, allow_hosts=tuple(allow_host or ()),
                            allow_origins=tuple(o.rstrip("/") for o in allow_origin or ()), token=token or "")
            config = ServerConfig(benchmark=benchmark, judges=tuple(judge or default_judges(benchmark)),
                                  workers=workers, reference=reference, access=access)
            web = create_app(service, config)
        shown = "localhost" if host == "127.0.0.1" else f"[{host}]" if ":" in host else host
        refining = f"; refines with {config.reference}" if config.reference else ""
        typer.echo(f"usl: serving {benchmark!r} (judge {public_judge(config.judges[0])}{refining}) at http://{shown}:{port}/  "
                   f"(API: http://{shown}:{port}/docs)", err=False)
        warning = exposure_warning(access, port)
        if warning:
            typer.echo(warning, err=True)
        from usl.leaderboard import remote

        local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        record = remote.announce(paths.home(ctx.obj.home), f"http://{local}:{port}")
        # uvicorn shuts down on SIGTERM, then raises it again with the handler it found: make that an exit
        # the server sees, so that the record goes with the server and the process ends (EndingServer).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        # usl rank, compare and usl.load() on this data directory ask this server while it runs
        EndingServer(uvicorn_config(web, host, port, config.connection, log_level="warning", access_log=False),
                     lambda: remote.withdraw(record)).run()


class EndingServer:
    """uvicorn's server that ends the process once it has shut down, from inside its event loop.

    By then requests are answered or cancelled and waiting work is dropped, but a worker thread may
    still be inside torch (a refinement step, a quality reading, a reward slice), or in a thread of
    asyncio's default executor. Returning from the loop would wait for the executor's threads (for
    minutes), and finalizing the interpreter under a thread inside torch aborts it ("terminate
    called without an active exception", status 134). So the process leaves with ``os._exit``:
    what such a thread committed is in the store, and a transaction it holds open is rolled back by
    SQLite, as after kill -9 (tested). Status 0 on SIGTERM or Ctrl-C, 1 when uvicorn could not start.
    """

    def __init__(self, config, withdraw: Callable[[], None]):
        import uvicorn

        self.withdraw = withdraw
        self.server = uvicorn.Server(config)
        self.server.serve = self._serve_then_end          # what uvicorn.Server.run runs in its loop

    def run(self) -> None:
        self.server.run()
        end(0, self.withdraw)     # not reached: the loop ends the process; kept for a server that returns

    async def _serve_then_end(self, sockets=None) -> None:
        status = 0
        try:
            await type(self.server).serve(self.server, sockets)
        except SystemExit as e:                     # SIGTERM (0), or a startup failure (1)
            status = e.code if isinstance(e.code, int) else 1
        except KeyboardInterrupt:                   # Ctrl-C, raised again by uvicorn after its shutdown
            status = 0
        end(status, self.withdraw)


def end(status: int, withdraw: Callable[[], None]) -> None:
    """Withdraw the server's record, flush the logs and leave now (see ``EndingServer``)."""
    withdraw()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def default_judges(benchmark: str) -> tuple[str, ...]:
    """``default``, and ``crm-factored`` where answer vectors ship for the benchmark (the default
    one): elsewhere its first board would read every pair with the transformer, an hour on a CPU."""
    from usl.store.benchmarks import DEFAULT_BENCHMARK

    return ("default", "crm-factored") if benchmark == DEFAULT_BENCHMARK else ("default",)


def ensure_benchmark(store, benchmark: str, home: str | None) -> None:
    """Import the default benchmark if the store lacks it, then make sure its topics exist."""
    from usl.store.benchmarks import DEFAULT_BENCHMARK, list_benchmarks

    if benchmark not in list_benchmarks(store):
        if benchmark != DEFAULT_BENCHMARK:
            raise DataError(f"benchmark {benchmark!r} is not in the store ({paths.db_path(home)}); "
                            f"import it with `usl data import ...` first")
        _import_default(store, home)
    _ensure_topics(store, benchmark, home)


def _import_default(store, home: str | None) -> None:
    from usl.data import alpaca_eval as ae
    from usl.store.benchmarks import save_benchmark

    started = time.perf_counter()
    shared = paths.shared_data()
    if shared is not None and (shared / "alpaca_eval").is_dir():
        source = str(shared / "alpaca_eval")
    else:
        typer.echo(f"usl: no local copy of AlpacaEval; downloading from {ae.DEFAULT_GITHUB}")
        source = str(ae.fetch(ae.DEFAULT_GITHUB, paths.cache_dir(home, "downloads", "alpaca_eval"), progress=True))
    typer.echo(f"usl: first start: importing AlpacaEval from {source}")
    imp = ae.load_alpaca_eval(source, split="board", progress=True)
    b = save_benchmark(store, imp.benchmark, imp.responses, imp.source)
    typer.echo(f"usl: imported {b.name!r}: {len(b.queries)} queries, {len(b.models)} models "
               f"in {time.perf_counter() - started:.1f}s")


def _ensure_topics(store, benchmark: str, home: str | None) -> None:
    try:
        from usl.data import topics
    except ImportError:  # topics are optional for serving: the board works without the columns
        log.warning("topics are not available in this installation; serving without topic columns")
        return
    if topics.load_topics(store, benchmark):
        return
    typer.echo(f"usl: building topics for {benchmark!r} (once)")
    started = time.perf_counter()
    from usl.data.embed import Embedder

    embedder = Embedder(cache_dir=paths.cache_dir(home, "embeddings"))
    found = topics.build_topics(store, benchmark, embedder, progress=True)
    typer.echo(f"usl: {len(found)} topics in {time.perf_counter() - started:.1f}s")
