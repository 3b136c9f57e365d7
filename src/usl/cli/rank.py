"""`usl rank` (one personal leaderboard) and `usl compare` (two criteria sets side by side)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
from typing import Callable, Iterator, List, Optional

import typer

from usl.cli.common import JUDGE_EPILOG, JUDGE_HELP
from usl.cli.common import user_errors as _user_errors
from usl.judges.registry import check_judge_name

FORMATS = ("table", "json", "csv", "md")
SERVER_HELP = ("Rank through a `usl serve` running on this data directory when there is one (the same board, "
               "without loading the judge here).")
YES_HELP = ("A judge whose quality reader is an LLM (default:quality=llm:...): send the readings the board "
            "lacks without asking (scripts).")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """As ``usl.cli.common.user_errors``, and a failing judge endpoint is one clear line too.

    Judgments finished before the failure are already cached: rerunning resumes from there. The LLM
    judge's module (and httpx with it: a fifth of a second) is not imported for this: only a command
    that loaded that judge can raise its error, and then the module is loaded.
    """
    with _user_errors():
        try:
            yield
        except Exception as e:
            llm = sys.modules.get("usl.judges.llm_api")
            if llm is None or not isinstance(e, llm.LLMJudgeError):
                raise
            typer.echo(f"error: {e} (judgments made so far are cached; rerun to resume)", err=True)
            sys.exit(2)


def register(app: typer.Typer) -> None:
    app.command("rank", help="Rank the benchmark's models by your criteria (win rate vs the baseline).",
                epilog=JUDGE_EPILOG)(rank)
    app.command("compare", help="Rank by two criteria sets and report how much the order changes "
                                "(Kendall's tau).", epilog=JUDGE_EPILOG)(compare)
    app.command("calibrate", help="Fit your calibration of the judge on your stored votes under these criteria "
                                  "(docs/calibration.md); `usl rank --calibration NAME` ranks under it.",
                epilog=JUDGE_EPILOG)(calibrate)


def rank(ctx: typer.Context,
         criteria: Optional[List[str]] = typer.Option(None, "--criteria", "-c",
                                                      help="A quality you like (repeatable). Default: a general "
                                                           "'helpful, accurate, well written'."),
         avoid: Optional[List[str]] = typer.Option(None, "--avoid", "-a", help="Something to avoid (repeatable)."),
         topics: str = typer.Option("", "--topics", help="Comma-separated topic ids or names to restrict to."),
         use_case: str = typer.Option("", "--use-case", help="Free text; ranks on the queries matching it."),
         judge: str = typer.Option("default", "--judge", help=JUDGE_HELP),
         baseline: Optional[str] = typer.Option(None, "--baseline", help="Baseline model (default: the benchmark's)."),
         benchmark: str = typer.Option("alpaca_eval", "--benchmark", help="Benchmark name in the store."),
         fmt: str = typer.Option("table", "--format", "-f", help="table | json | csv | md"),
         n_bootstrap: int = typer.Option(1000, "--n-bootstrap", help="Bootstrap resamples of the queries for CIs "
                                                                     "(0: none, or 10 to 10,000)."),
         seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
         per_criterion: bool = typer.Option(True, "--per-criterion/--no-per-criterion",
                                            help="Also judge each criterion alone (breakdown)."),
         reference: Optional[str] = typer.Option(None, "--reference",
                                                 help="Also report rank correlation with a published board: "
                                                      "alpaca_eval_2 | alpaca_eval_2_raw | alpaca_eval_1."),
         refine: Optional[str] = typer.Option(None, "--refine",
                                              help="Refine the board with a slower reference judge (crm, crm:PATH): "
                                                   "it judges queries in a fixed order, and the board is its "
                                                   "estimated board given those and the fast judge's scores of all. "
                                                   "Judgments are cached: a rerun goes on where this one stopped."),
         refine_queries: Optional[int] = typer.Option(None, "--refine-queries", min=0,
                                                      help="With --refine: judge at most this many more queries "
                                                           "(default: all the rest)."),
         refine_seconds: Optional[float] = typer.Option(None, "--refine-seconds", min=0,
                                                        help="With --refine: stop judging after about this long "
                                                             "(checked between queries)."),
         spec_file: Optional[str] = typer.Option(None, "--spec", help="Rank by the spec a board records: a file of "
                                                                      "`usl rank --format json` (or its 'spec' alone); "
                                                                      "warns when the judge or data differ from the "
                                                                      "recorded ones."),
         calibration: str = typer.Option("", "--calibration", help="Rank under your calibration of the judge, "
                                                                   "fitted on your votes (`usl calibrate NAME`); "
                                                                   "without --criteria, under its criteria."),
         use_server: bool = typer.Option(True, "--server/--no-server", help=SERVER_HELP),
         yes: bool = typer.Option(False, "--yes", "-y", help=YES_HELP),
         ) -> None:
    with user_errors():
        if fmt not in FORMATS:
            raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        recorded = None
        if spec_file is not None:
            if criteria or avoid or topics.strip() or use_case.strip():
                raise ValueError("--spec gives the criteria, topics and use case; leave out --criteria, --avoid, "
                                 "--topics and --use-case")
            if calibration:
                raise ValueError("--spec names its calibration; leave out --calibration")
            given = [f"--{name.replace('_', '-')}" for name in SPEC_GIVES
                     if ctx.get_parameter_source(name).name == "COMMANDLINE"]
            if given:
                raise ValueError(f"--spec gives the judge, baseline, benchmark, resamples, seed and breakdown; leave "
                                 f"out {', '.join(given)} (or edit the file)")
            spec, recorded = _read_spec(spec_file)
        else:
            spec = _spec(criteria, avoid, topics, use_case, judge, baseline, benchmark, n_bootstrap, seed,
                         per_criterion, calibration=calibration)
            if calibration:
                from usl.leaderboard.calibrations import under

                spec = under(ctx.obj.store(), spec, bool(criteria or avoid))
        if refine is None and (refine_queries is not None or refine_seconds is not None):
            raise ValueError("--refine-queries and --refine-seconds need --refine JUDGE")
        if reference:
            from usl.leaderboard.names import check_reference

            check_reference(reference)        # before any board is judged
        remote = _remote(ctx) if use_server and refine is None else None
        board = remote.rank(spec) if remote is not None else None
        svc = None
        if board is None:
            try:
                svc, (spec,) = _here(ctx, [spec], yes)
            except (ValueError, FileNotFoundError) as e:  # a name or a judge of the file: say which file
                if spec_file is None:
                    raise
                raise ValueError(f"{spec_file}: {e}") from None
            if refine is not None:
                svc.judge(refine)      # a wrong reference fails now, not after the fast board
            with _progress() as progress:
                board = svc.rank(spec, progress=progress)
        if refine is not None:
            with _progress("refining", "query") as progress:
                board = svc.refine(spec, refine, queries=refine_queries, seconds=refine_seconds, progress=progress)
        out = board.to_json()
        if reference:
            found = remote.reference_agreement(spec, reference) if svc is None else None
            out["reference"] = found or _reference(svc or _service(ctx), spec, board, reference,
                                                   refined=refine is not None)
        _emit_warnings(board.warnings)
        if recorded is not None:
            from usl.leaderboard.types import drift

            _emit_warnings(drift(recorded, board.spec))
        if fmt == "json":
            typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        else:
            typer.echo(render(board, fmt))
            if fmt == "table":
                typer.echo(board_line(board.spec))
            if fmt == "table" and board.criteria_breakdown:
                typer.echo(_breakdown_table(board))
            if fmt == "table" and board.criteria_reading:
                typer.echo(reading_lines(board.criteria_reading))
            if refine is not None:
                r = board.spec["refinement"]
                typer.echo(f"\nrefined with {r['reference_identity']}: {r['queries_judged']} of {r['queries']} "
                           f"queries judged" + ("" if r["complete"] else " (rerun to judge more)"))
            if reference:
                r = out["reference"]
                ci = lambda k: f" (95% CI {r[k][0]:.2f} to {r[k][1]:.2f})" if k in r else ""
                typer.echo(f"\nvs published {r['name']} ({r['n_models']} common models): "
                           f"Spearman rho = {r['spearman_rho']:.3f}{ci('spearman_rho_ci')}, "
                           f"Kendall tau = {r['kendall_tau']:.3f}{ci('kendall_tau_ci')}"
                           + ("; intervals over resamples of the queries" if "spearman_rho_ci" in r else ""))


def compare(ctx: typer.Context,
            a_criteria: Optional[List[str]] = typer.Option(None, "--a-criteria", help="Set A: a liked quality (repeatable)."),
            a_avoid: Optional[List[str]] = typer.Option(None, "--a-avoid", help="Set A: something to avoid (repeatable)."),
            b_criteria: Optional[List[str]] = typer.Option(None, "--b-criteria", help="Set B: a liked quality (repeatable)."),
            b_avoid: Optional[List[str]] = typer.Option(None, "--b-avoid", help="Set B: something to avoid (repeatable)."),
            topics: str = typer.Option("", "--topics", help="Comma-separated topic ids or names to restrict to."),
            use_case: str = typer.Option("", "--use-case", help="Free text; ranks on the queries matching it."),
            judge: str = typer.Option("default", "--judge", help=JUDGE_HELP),
            baseline: Optional[str] = typer.Option(None, "--baseline", help="Baseline model."),
            benchmark: str = typer.Option("alpaca_eval", "--benchmark", help="Benchmark name in the store."),
            n_bootstrap: int = typer.Option(1000, "--n-bootstrap", help="Bootstrap resamples for CIs."),
            seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
            as_json: bool = typer.Option(False, "--json", help="Print JSON: {a, b, kendall_tau, spearman_rho, warnings}."),
            use_server: bool = typer.Option(True, "--server/--no-server", help=SERVER_HELP),
            yes: bool = typer.Option(False, "--yes", "-y", help=YES_HELP),
            ) -> None:
    with user_errors():
        if not (a_criteria or a_avoid) or not (b_criteria or b_avoid):
            raise ValueError("give both sets: --a-criteria/--a-avoid and --b-criteria/--b-avoid")
        common = dict(topics=topics, use_case=use_case, judge=judge, baseline=baseline, benchmark=benchmark,
                      n_bootstrap=n_bootstrap, seed=seed, per_criterion=False)
        sa = _spec(a_criteria, a_avoid, **common, options=("--a-criteria", "--a-avoid"))
        sb = _spec(b_criteria, b_avoid, **common, options=("--b-criteria", "--b-avoid"))
        remote = _remote(ctx) if use_server else None
        cmp = remote.compare(sa, sb) if remote is not None else None
        if cmp is None:
            svc, (sa, sb) = _here(ctx, [sa, sb], yes)
            with _progress() as progress:
                svc.rank(sa, progress=progress)
                svc.rank(sb, progress=progress)
            cmp = svc.compare(sa, sb)
        _emit_warnings(cmp.warnings)
        if as_json:
            typer.echo(json.dumps({"a": cmp.a.to_json(), "b": cmp.b.to_json(), "kendall_tau": cmp.kendall_tau,
                                   "spearman_rho": cmp.spearman_rho, "warnings": list(cmp.warnings)},
                                  indent=2, ensure_ascii=False))
            return
        typer.echo("A: " + "; ".join(sa.criteria.as_list()))
        typer.echo(render(cmp.a, "table"))
        typer.echo("\nB: " + "; ".join(sb.criteria.as_list()))
        typer.echo(render(cmp.b, "table"))
        typer.echo(f"\nKendall tau = {cmp.kendall_tau:.3f}   Spearman rho = {cmp.spearman_rho:.3f}")


def calibrate(ctx: typer.Context,
              name: str = typer.Argument(..., help="The calibration's name (an existing one is refitted)."),
              criteria: Optional[List[str]] = typer.Option(None, "--criteria", "-c",
                                                           help="The criteria you voted under (repeatable)."),
              avoid: Optional[List[str]] = typer.Option(None, "--avoid", "-a", help="Something to avoid (repeatable)."),
              judge: str = typer.Option("default", "--judge", help=JUDGE_HELP),
              benchmark: str = typer.Option("alpaca_eval", "--benchmark", help="Benchmark name in the store."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON: {calibration, moved}.")) -> None:
    with user_errors():
        spec = _checked(ctx, _spec(criteria, avoid, judge=judge, benchmark=benchmark))
        with _progress() as progress:
            svc = _service(ctx)
            svc.prepare(benchmark, judge, progress, quality=False)
            report = svc.calibrate(name, spec)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        return
    c = report.calibration
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    typer.echo(f"calibration {c['name']!r} ({c['version']}): {c['votes']} votes; the judge agrees with "
               f"{pct(c['before'])} of them, the calibrated judge with {pct(c['after'])} (leave-one-out)")
    for term, w0, w in zip(c["terms"], c["shipped"], c["weights"]):
        typer.echo(f"  {term:40} {w0:5.2f} -> {w:5.2f}")
    moved = [m for m in report.moved if m.before != m.after][:10]
    if moved:
        typer.echo("moved most: " + "; ".join(f"{m.model} {m.before} -> {m.after}" for m in moved))


# ---- shared by the commands -------------------------------------------------------------------
OPTIONS = {"topics": "--topics", "use_case": "--use-case", "judge": "--judge", "baseline": "--baseline",
           "benchmark": "--benchmark", "n_bootstrap": "--n-bootstrap", "seed": "--seed",
           "calibration": "--calibration"}   # spec field -> option


# what a --spec file sets that rank's options would otherwise
SPEC_GIVES = ("judge", "baseline", "benchmark", "n_bootstrap", "seed", "per_criterion")


def _spec(criteria, avoid, topics="", use_case="", judge="default", baseline=None, benchmark="alpaca_eval",
          n_bootstrap=1000, seed=0, per_criterion=True, options=("--criteria", "--avoid"), calibration=""):
    from usl.leaderboard.limits import InputError
    from usl.leaderboard.types import LeaderboardSpec
    from usl.types import Criteria

    topic_names = tuple(t.strip() for t in topics.split(",") if t.strip())
    if topics.strip() and not topic_names:
        raise ValueError(f"--topics {topics!r} names no topic")
    kw = {}
    if criteria or avoid:
        kw["criteria"] = Criteria(tuple(criteria or ()), tuple(avoid or ()))
    if topics and use_case:
        raise ValueError("use --topics or --use-case, not both")
    try:            # every field in its range (usl.leaderboard.limits), before anything loads
        return LeaderboardSpec(benchmark=benchmark, topics=topic_names, use_case=use_case, judge=judge,
                               baseline=baseline, n_bootstrap=n_bootstrap, seed=seed, per_criterion=per_criterion,
                               calibration=calibration, **kw)
    except InputError as e:
        raise ValueError(e.named({**OPTIONS, "criteria.likes": options[0], "criteria.avoid": options[1]})) from None


def _here(ctx: typer.Context, specs: list, yes: bool):
    """The boards of ``specs`` ranked in this process (no server): (the service, the specs with their
    names checked against the store). What they would send an LLM is shown and confirmed first."""
    specs = [_checked(ctx, s) for s in specs]
    svc = _service(ctx)
    for spec in {(s.judge, s.benchmark, s.baseline): s for s in specs}.values():     # one board's pairs each
        _confirm_llm_readings(svc, spec, yes)
    return svc, specs


def _confirm_llm_readings(svc, spec, yes: bool) -> None:
    """A judge whose quality reader is an LLM reads the board's pairs it has no reading of before
    ranking (the default board: 20,752): say what that sends, and ask (``usl quality fill`` reads
    them with progress and resume)."""
    from usl.cli.common import confirm_spend
    from usl.cli.quality import llm_reader, llm_spend
    from usl.judges.base import HasQualityTerm

    judge = svc.judge(spec.judge)
    reading = judge.quality if isinstance(judge, HasQualityTerm) else None
    if reading is None or llm_reader(reading) is None:   # a local reader: nothing to count (0.4 s saved)
        return
    pairs = svc.pair_texts(spec)
    spend = llm_spend(reading, *pairs)
    n = reading.missing(*pairs) if spend else 0
    if n:
        typer.echo(f"the board lacks {n:,} quality readings of {reading.gate.reader_identity}: {spend}", err=True)
        confirm_spend(spend, yes)


def _read_spec(path: str):
    """(the spec, what the file recorded) from a saved board, a board's ``{"spec": ...}`` alone, or a bare
    spec (which has no field named "spec")."""
    from usl.data.io import read_json
    from usl.leaderboard.types import LeaderboardSpec

    found = read_json(path)
    recorded = found["spec"] if isinstance(found, dict) and isinstance(found.get("spec"), dict) else found
    spec = LeaderboardSpec.from_json(recorded, where=f"{path}: spec")
    try:       # a judge named in a file is checked here, where the file can be named; a service may serve more
        check_judge_name(spec.judge)
    except ValueError as e:
        raise ValueError(f"{path}: spec.judge: {e}") from None
    return spec, recorded


def _remote(ctx: typer.Context):
    from usl import paths
    from usl.leaderboard.remote import connect

    return connect(paths.home(ctx.obj.home))


def _checked(ctx: typer.Context, spec):
    """``spec`` after its names are checked against the store, before the judge loads (a typo fails in a
    fraction of a second); its topics become ids, as the server records them."""
    from usl.leaderboard.names import check_names

    return check_names(ctx.obj.store(), spec)


def _service(ctx: typer.Context):
    from usl.leaderboard.service import LeaderboardService

    state = ctx.obj
    return LeaderboardService(state.store(), home=state.home)


class _progress:
    """A tqdm bar on stderr, opened on the first report of a job with work to do; none where stderr is not a
    terminal (a log, or stderr joined to stdout in a pipe), whose bar would end in carriage returns with no
    newline before the table."""

    def __init__(self, desc: str = "judging", unit: str = "judgment"):
        self.desc, self.unit = desc, unit

    def __enter__(self) -> Callable[[int, int], None]:
        self.bar = None
        return self.update

    def update(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if self.bar is None or self.bar.total != total or done < self.bar.n:
            if self.bar is not None:
                self.bar.close()
            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, file=sys.stderr, leave=False, disable=None)
        self.bar.update(done - self.bar.n)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def _emit_warnings(warnings) -> None:
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)


def _reference(svc, spec, board, name: str, refined: bool) -> dict:
    """Agreement with a published board. A fast board's comes with intervals over the same query
    resamples as its win rates; a refined board's is read off its rows (its estimator has none)."""
    from usl.leaderboard.reference import load_reference
    from usl.leaderboard.stats import agreement

    ref = load_reference(name)
    found = agreement({r.model: r.win_rate for r in board.rows}, ref) if refined else svc.reference_agreement(spec, ref)
    return {"name": name, **found}


COLUMNS = ("rank", "model", "win_rate", "ci_low", "ci_high", "n", "n_missing", "lc_win_rate", "avg_length", "rating")


def _records(board) -> list[list]:
    """The rows as the table and CSV show them: no interval (blank) where the board drew no resample."""
    drawn = board.has_interval
    return [[r.rank, r.model, r.win_rate, r.ci[0] if drawn else "", r.ci[1] if drawn else "", r.n, r.n_missing,
             "" if r.lc_win_rate is None else r.lc_win_rate, r.avg_length, "" if r.rating is None else r.rating]
            for r in board.rows]


def render(board, fmt: str) -> str:
    """The board as an aligned text table, CSV or a Markdown table."""
    recs = _records(board)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows(recs)
        return buf.getvalue().rstrip("\n")
    head = ["#", "model", "win %", "95% CI", "n", "LC %", "words", "BT"]
    body = [[str(r[0]), r[1], f"{r[2]:.1f}", f"{r[3]:.1f}-{r[4]:.1f}" if r[3] != "" else "-",
             str(r[5]) + (f" (-{r[6]})" if r[6] else ""),
             f"{r[7]:.1f}" if r[7] != "" else "off", f"{r[8]:.0f}", f"{r[9]:.0f}" if r[9] != "" else ""]
            for r in recs]
    if fmt == "md":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt_row = lambda row: "  ".join(x.rjust(w) if i != 1 else x.ljust(w) for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt_row(head), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in body])


def board_line(spec: dict) -> str:
    """What the table's rows stand on: the queries (and the topics they were matched to) and why length
    control is on or off ("LC %" reads "off" on every row without it)."""
    topics = spec.get("topic_names") or []
    where = f" in {len(topics)} topic(s): {', '.join(topics)}" if topics and (spec.get("topics") or spec.get("use_case")) else ""
    return f"\n{spec.get('n_queries', '?')} queries{where}; length control {spec.get('length_control', 'on')}"


def reading_lines(reading) -> str:
    """How the judge reads each criterion, one line each, with its note where it has one."""
    lines = ["", "How the judge reads your criteria (its accuracy on held-out pairs of that kind):"]
    for r in reading:
        acc = f"accuracy {r.accuracy:.2f} on {r.n} pairs" if r.accuracy is not None else "accuracy not measured"
        lines.append(f"  {r.kind:<11} {acc}; quality share {r.quality_share:.2f}  {r.text}")
        if r.note:
            lines.append(f"              note: {r.note}")
    return "\n".join(lines)


def _breakdown_table(board) -> str:
    crits = list(board.criteria_breakdown)
    lines = ["", "Per criterion (win % judged on that criterion alone; share = contribution to the combined board):"]
    for i, c in enumerate(crits):
        share = board.criteria_contribution.get(c)
        lines.append(f"  c{i + 1} [share {share:.2f}] {c}" if share is not None else f"  c{i + 1} {c}")
    head = ["model"] + [f"c{i + 1}" for i in range(len(crits))]
    body = [[r.model] + [f"{board.criteria_breakdown[c].get(r.model, float('nan')):.1f}" for c in crits]
            for r in board.rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    for row in [head] + body:
        lines.append("  " + "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)
