"""`usl serve`: the web page and its JSON API.

On a fresh data directory the default benchmark is imported first (from ``../shared/data`` when it
is there, else downloaded from AlpacaEval's GitHub) and its topics are built, with progress on the
terminal, so that ``usl serve`` alone gives a working leaderboard.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from typing import List, Optional

import typer

from usl import paths
from usl.cli.common import JUDGE_EPILOG, user_errors
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
        import uvicorn

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
        # that runs the finally clause, so the record goes with the server.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:            # usl rank, compare and usl.load() on this data directory ask this server while it runs
            uvicorn.Server(uvicorn_config(web, host, port, config.connection, log_level="warning",
                                          access_log=False)).run()
        finally:
            remote.withdraw(record)


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
