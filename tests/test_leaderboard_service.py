"""The service and the CLI on a small benchmark in a real store, with a criteria-aware test judge."""

import json
from dataclasses import dataclass

import numpy as np
import pytest
from typer.testing import CliRunner

from usl.cli import app
from usl.judges.base import Verdict
from usl.judges.registry import register
from usl.leaderboard.service import LeaderboardService
from usl.leaderboard.types import LeaderboardSpec
from usl.store import Store
from usl.store.benchmarks import save_benchmark
from usl.types import Benchmark, Criteria, Query, Response

CALLS = {"n": 0}


@dataclass
class StyleJudge:
    """Prefers the longer answer, or the shorter one when a like says 'concise'; ties on equal length."""

    name: str = "style"
    version: str = "1"
    can_tie: bool = True

    @property
    def identity(self):
        return f"{self.name}@{self.version}"

    def judge(self, requests):
        CALLS["n"] += len(requests)
        out = []
        for r in requests:
            la, lb = len(r.response_a.split()), len(r.response_b.split())
            if any("concise" in c for c in r.criteria.likes):
                la, lb = -la, -lb
            out.append(Verdict(1.0) if la > lb else Verdict(0.0) if la < lb else Verdict(0.0, 1.0))
        return out

    def read_criteria(self, criteria):
        """It reads length wishes as the default judge does (a judge that reads none keeps length control on)."""
        from usl.fast.length_intent import read_wishes
        from usl.types import CriteriaReading

        return CriteriaReading(tuple(read_wishes(criteria.as_list())))


register("style")(lambda arg=None, **_: StyleJudge())

# model -> words per answer; m3 misses q9
WORDS = {"base": 10, "m1": 20, "m2": 5, "m3": 15}
N_Q = 10


@pytest.fixture
def home(tmp_path):
    store = Store(tmp_path / "usl.sqlite")
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(N_Q))
    resp = [Response(q.id, m, " ".join(["w"] * (w + (i % 3 if m == "m1" else 0))))
            for i, q in enumerate(queries) for m, w in WORDS.items() if not (m == "m3" and i == 9)]
    save_benchmark(store, Benchmark("tiny", queries, tuple(WORDS), "base"), resp, source="test")
    with store.transaction() as con:   # two stored topics: even and odd queries
        con.executemany("INSERT INTO topics(benchmark, id, name, keywords) VALUES ('tiny', ?, ?, '')",
                        [("even", "Even questions"), ("odd", "Odd questions")])
        con.executemany("INSERT INTO query_topics(benchmark, query_id, topic_id) VALUES ('tiny', ?, ?)",
                        [(f"q{i}", "even" if i % 2 == 0 else "odd") for i in range(N_Q)])
    store.close()
    return tmp_path


def spec(**kw):
    kw.setdefault("criteria", Criteria(("helpful",)))
    kw.setdefault("judge", "style")
    return LeaderboardSpec(benchmark="tiny", n_bootstrap=200, **kw)


def test_rank_values_missing_and_spec(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    board = svc.rank(spec())
    rows = {r.model: r for r in board.rows}
    assert [r.model for r in board.rows] == ["m1", "m3", "m2"]
    assert rows["m1"].win_rate == 100.0 and rows["m2"].win_rate == 0.0
    assert (rows["m3"].n, rows["m3"].n_missing) == (9, 1)
    assert rows["m1"].rank == 1 and rows["m2"].rank == 3
    assert rows["m2"].avg_length == 5.0
    assert rows["m1"].lc_win_rate is not None
    s = board.spec
    assert s["judge_identity"] == "style@1" and s["baseline"] == "base" and s["benchmark_version"]
    assert s["length_control"] == "on" and s["n_bootstrap"] == 200 and "usl_version" in s
    assert rows["m1"].rating > 1000 > rows["m2"].rating


def test_cached_second_rank_judges_nothing_and_is_identical(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    first = svc.rank(spec())
    n = CALLS["n"]
    again = LeaderboardService(Store(home / "usl.sqlite")).rank(spec())   # fresh instance: the SQLite cache
    assert CALLS["n"] == n
    assert first.to_json() == again.to_json()


def test_length_control_off_and_breakdown(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    board = svc.rank(spec(criteria=Criteria(("Be concise", "helpful"))))
    assert board.spec["length_control"].startswith("off") and "concise" in board.spec["length_control"]
    assert all(r.lc_win_rate is None for r in board.rows)
    assert set(board.criteria_breakdown) == {"Be concise", "helpful"}
    assert board.criteria_breakdown["Be concise"]["m2"] == 100.0
    assert board.criteria_breakdown["helpful"]["m2"] == 0.0
    assert sum(board.criteria_contribution.values()) == pytest.approx(1.0, abs=1e-3)
    assert board.criteria_contribution["Be concise"] > 0.9     # the combined judge follows 'concise'


def test_compare_concise_vs_detailed_reverses_and_warns(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    cmp = svc.compare(spec(criteria=Criteria(("concise",))), spec(criteria=Criteria(("detailed", "brief"))))
    assert cmp.kendall_tau == pytest.approx(-1.0)
    assert any(w.startswith("B: ") and "length" in w for w in cmp.warnings)


def test_examples_alternate_wins_and_losses(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    ex = svc.examples(spec(criteria=Criteria(("concise",))), "m3", limit=3)
    assert len(ex) == 3 and all(e.p_model_wins == 0.0 for e in ex)       # m3 is longer: loses everywhere
    assert ex[0].baseline_answer == " ".join(["w"] * 10)
    with pytest.raises(ValueError, match="unknown model"):
        svc.examples(spec(), "nope")


def test_topics_per_row_and_selection(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    board = svc.rank(spec(criteria=Criteria(("concise",))))
    m3 = next(r for r in board.rows if r.model == "m3")
    assert m3.topics == {"Even questions": 0.0, "Odd questions": 0.0}
    odd = svc.rank(spec(topics=("odd",)))
    assert odd.spec["n_queries"] == 5 and odd.spec["topic_names"] == ["Odd questions"]
    assert {r.model: r.n for r in odd.rows}["m3"] == 4          # q9 (odd) is m3's missing answer
    by_name = svc.rank(spec(topics=("even questions",)))
    assert by_name.spec["n_queries"] == 5
    assert svc.rank(spec(topics=("Ev",))).spec["topic_names"] == ["Even questions"]   # unique prefix
    with pytest.raises(ValueError, match=r"unknown topic 'nope'; topics \(id and name\): .*even \(Even questions\)"):
        svc.rank(spec(topics=("nope",)))


@pytest.mark.parametrize("kw,msg", [({"baseline": "zzz"}, "baseline 'zzz' is not a model"),
                                    ({"topics": ("a",), "use_case": "b"}, "not both"),
                                    ({"judge": "nope"}, "unknown judge")])
def test_errors(home, kw, msg):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    s = LeaderboardSpec(**({"benchmark": "tiny", "judge": "style"} | kw))
    with pytest.raises(ValueError, match=msg):
        svc.rank(s)


def test_other_baseline(home):
    board = LeaderboardService(Store(home / "usl.sqlite")).rank(spec(baseline="m2"))
    assert {r.model for r in board.rows} == {"base", "m1", "m3"}
    assert all(r.win_rate == 100.0 for r in board.rows)


runner = CliRunner()


def cli(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def test_cli_rank_json_contract(home):
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "-c", "helpful", "--format", "json",
              "--n-bootstrap", "100")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["spec"]["judge_identity"] == "style@1" and out["spec"]["seed"] == 0
    row = out["rows"][0]
    assert {"model", "rank", "win_rate", "ci", "n", "topics"} <= set(row)
    assert row["model"] == "m1" and len(row["ci"]) == 2
    assert row["topics"] == {"Even questions": 100.0, "Odd questions": 100.0}


@pytest.mark.parametrize("fmt,first", [("csv", "rank,model,win_rate"), ("md", "| # | model"), ("table", "#")])
def test_cli_rank_formats(home, fmt, first):
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "--format", fmt, "--n-bootstrap", "50")
    assert res.exit_code == 0, res.output
    assert res.stdout.lstrip().startswith(first)
    assert "m1" in res.stdout
    assert ("\n10 queries; length control " in res.stdout) == (fmt == "table")   # what "LC %" reads stands on


def test_the_table_names_the_topics_its_queries_were_matched_to(home):
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "--topics", "even", "--n-bootstrap", "50")
    assert res.exit_code == 0, res.output
    assert "\n5 queries in 1 topic(s): Even questions; length control " in res.stdout


def test_a_board_without_resamples_shows_no_interval_and_a_single_answer_is_flagged(tmp_path):
    store = Store(tmp_path / "usl.sqlite")
    queries = tuple(Query(f"q{i}", f"question {i}") for i in range(N_Q))
    resp = [Response(q.id, m, " ".join(["w"] * WORDS[m])) for q in queries for m in ("base", "m1")]
    save_benchmark(store, Benchmark("tiny", queries, ("base", "m1", "solo"), "base"),
                   resp + [Response("q0", "solo", "w " * 30)], source="test")
    store.close()
    csv = cli(tmp_path, "rank", "--benchmark", "tiny", "--judge", "style", "--format", "csv", "--n-bootstrap", "0")
    assert csv.exit_code == 0, csv.output
    lines = csv.stdout.strip().splitlines()
    assert lines[0].startswith("rank,model,win_rate,ci_low,ci_high")
    assert all(line.split(",")[3:5] == ["", ""] for line in lines[1:])       # no resample, no interval
    table = cli(tmp_path, "rank", "--benchmark", "tiny", "--judge", "style", "--n-bootstrap", "0")
    assert " - " in table.stdout.splitlines()[2] and "100.0-100.0" not in table.stdout
    none = json.loads(cli(tmp_path, "rank", "--benchmark", "tiny", "--judge", "style", "--format", "json",
                          "--n-bootstrap", "0").stdout)
    assert none["rows"] and all(r["ci"] is None for r in none["rows"])     # JSON: null, not [w, w]
    board = json.loads(cli(tmp_path, "rank", "--benchmark", "tiny", "--judge", "style", "--format", "json",
                           "--n-bootstrap", "50").stdout)
    assert "solo: one answered query in the selection; its win rate and interval rest on it alone" in board["warnings"]
    assert not any(w.startswith("m1:") for w in board["warnings"])


def test_cli_compare_json_has_tau_and_warning(home):
    res = cli(home, "compare", "--benchmark", "tiny", "--judge", "style", "--a-criteria", "concise",
              "--b-criteria", "detailed", "--b-criteria", "brief", "--json", "--n-bootstrap", "50")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kendall_tau"] == pytest.approx(-1.0)
    assert out["a"]["rows"] and out["b"]["rows"]
    assert any("length" in w for w in out["warnings"])


@pytest.mark.parametrize("args,msg", [(["rank", "--format", "xml"], "--format must be one of"),
                                      (["rank", "--benchmark", "nope"], "unknown benchmark"),
                                      (["compare", "--a-criteria", "x"], "give both sets")])
def test_cli_errors_exit_2(home, args, msg):
    res = cli(home, *args)
    assert res.exit_code == 2
    assert msg in res.output


def test_judge_prepare_gets_the_whole_benchmark_once(home):
    seen = []

    class Preparing(StyleJudge):
        def prepare(self, queries, answers, progress=None):
            seen.append((len(queries), len(answers)))

    register("preparing")(lambda arg=None, **_: Preparing())
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    svc.rank(LeaderboardSpec(benchmark="tiny", judge="preparing", n_bootstrap=10))
    svc.rank(LeaderboardSpec(benchmark="tiny", judge="preparing", n_bootstrap=10, criteria=Criteria(("x",))))
    assert seen == [(39, 39)]          # 4 models x 10 queries - m3's missing answer, once


# ---- refinement by a slower reference judge -----------------------------------------------------
@dataclass
class NoCacheJudge(StyleJudge):
    name: str = "nocache"
    cacheable: bool = False


register("nocache")(lambda arg=None, **_: NoCacheJudge())
CONCISE = Criteria(("concise",))     # style (fast): the shorter answer wins; length (reference): the longer


def test_refine_judges_in_order_resumes_and_ends_at_the_references_board(home):
    from usl.leaderboard.refine import refinement_order

    svc = LeaderboardService(Store(home / "usl.sqlite"))
    seen = []
    board = svc.refine(spec(criteria=CONCISE), "length", queries=3, progress=lambda d, t: seen.append((d, t)))
    assert sorted(set(seen)) == [(0, 3), (1, 3), (2, 3), (3, 3)]      # also within a query (refine.STEP_ITEMS)
    assert seen[-1] == (3, 3)
    r = board.spec["refinement"]
    assert (r["queries_judged"], r["queries"], r["complete"], r["reference_identity"]) == (3, N_Q, False, "length@1")
    assert any("3 of 10 queries judged" in w for w in board.warnings)
    # the cache holds exactly the first three queries of the refinement order, for every model
    from usl.leaderboard.jobs import ScoringJob, cached_scores

    data = svc.answers("tiny")
    g = cached_scores(data, svc.judge("length"), ScoringJob(CONCISE, "base", ("m1", "m2", "m3"),
                                                            tuple(f"q{i}" for i in range(N_Q))), svc.cache)
    judged = {f"q{j}" for j in np.flatnonzero(~np.isnan(g).all(axis=0))}
    assert judged == set(refinement_order([f"q{i}" for i in range(N_Q)])[:3])

    again = LeaderboardService(Store(home / "usl.sqlite"))          # a restart resumes from the cache
    assert again.refine(spec(criteria=CONCISE), "length", seconds=0, queries=None).spec["refinement"][
        "queries_judged"] == 3
    done = again.refine(spec(criteria=CONCISE), "length", queries=None)
    assert done.spec["refinement"]["complete"] and not any("queries judged" in w for w in done.warnings)
    ref = again.rank(spec(criteria=CONCISE, judge="length"))
    assert {r.model: r.win_rate for r in done.rows} == {r.model: r.win_rate for r in ref.rows} == \
        {"m1": 100.0, "m3": 100.0, "m2": 0.0}
    fast = again.rank(spec(criteria=CONCISE))
    assert [r.model for r in fast.rows][0] == "m2" and [r.model for r in done.rows][-1] == "m2"
    assert all(r.rating is None and r.lc_win_rate is None for r in done.rows) and not done.criteria_breakdown


def test_a_progress_that_raises_stops_the_reference_within_a_query(home, monkeypatch):
    """A server's closed stream raises from ``progress``: the reference stops after STEP_ITEMS more
    judgments, not at the end of its query, and keeps them."""
    import usl.leaderboard.refine as refine
    from usl.leaderboard.jobs import ScoringJob, cached_scores

    monkeypatch.setattr(refine, "STEP_ITEMS", 2)           # a query here is 3 models x 2 orders = 6 items
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 2:                                 # the first report within the first query
            raise RuntimeError("client left")

    svc = LeaderboardService(Store(home / "usl.sqlite"))
    with pytest.raises(RuntimeError, match="client left"):
        svc.refine(spec(criteria=CONCISE), "length", queries=1, progress=progress)
    g = cached_scores(svc.answers("tiny"), svc.judge("length"), ScoringJob(
        CONCISE, "base", ("m1", "m2", "m3"), tuple(f"q{i}" for i in range(N_Q))), svc.cache)
    assert calls == [0, 0] and int((~np.isnan(g)).sum()) == 1     # one pair, both orders, of 3 x 10


def test_refine_counts_only_the_selected_topic(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    board = svc.refine(spec(criteria=CONCISE, topics=("even",)), "length", queries=None)
    assert board.spec["refinement"]["queries_judged"] == board.spec["refinement"]["queries"] == 5
    assert {r.model: r.topics for r in board.rows}["m1"] == {"Even questions": 100.0}
    # For the whole board only the judged prefix of its order is a random sample: the even queries
    # count up to the first odd one, and the rest wait until the whole board's turn comes to them.
    from usl.leaderboard.refine import refinement_order

    order = refinement_order([f"q{i}" for i in range(N_Q)])
    lead = next(i for i, q in enumerate(order) if int(q[1:]) % 2)
    whole = svc.refine(spec(criteria=CONCISE), "length")
    assert whole.spec["refinement"]["queries_judged"] == lead < 5
    seen = []
    done = svc.refine(spec(criteria=CONCISE), "length", queries=None, progress=lambda d, t: seen.append((d, t)))
    assert done.spec["refinement"]["complete"] and seen[-1] == (5, 5)     # only the odd queries were judged


def test_refine_needs_a_reference_that_keeps_its_judgments(home):
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    with pytest.raises(ValueError, match="keeps no judgments"):
        svc.refine(spec(criteria=CONCISE), "nocache", queries=1)


def test_cli_rank_refine(home):
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "-c", "concise", "--refine", "length",
              "--refine-queries", "2", "--format", "json", "--n-bootstrap", "50")
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["spec"]["refinement"]
    assert (r["queries_judged"], r["queries"], r["reference"]) == (2, N_Q, "length")
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "-c", "concise", "--refine", "length",
              "--n-bootstrap", "50")
    assert res.exit_code == 0, res.output
    assert f"refined with length@1: {N_Q} of {N_Q} queries judged" in res.stdout
    res = cli(home, "rank", "--benchmark", "tiny", "--refine-seconds", "5")
    assert res.exit_code == 2 and "need --refine JUDGE" in res.output


def test_cli_rank_refuses_an_unknown_reference_before_ranking(home):
    n = CALLS["n"]
    res = cli(home, "rank", "--benchmark", "tiny", "--judge", "style", "--refine", "bogus")
    assert res.exit_code == 2 and "unknown judge 'bogus'" in res.output
    assert CALLS["n"] == n                  # nothing was judged first


def test_agreement_with_a_published_board_comes_with_intervals_over_the_queries(home):
    """m1 and m3 win every query against the baseline, m2 none (the style judge likes length)."""
    svc = LeaderboardService(Store(home / "usl.sqlite"))
    svc.rank(spec())
    n = CALLS["n"]
    agree = svc.reference_agreement(spec(), {"m1": 9.0, "m3": 9.0, "m2": 1.0, "elsewhere": 5.0})
    assert CALLS["n"] == n                                  # read from the cache the rank filled
    assert agree["models"] == ["m1", "m2", "m3"] and agree["n_models"] == 3
    assert agree["spearman_rho"] == pytest.approx(1.0) and agree["spearman_rho_ci"] == pytest.approx([1.0, 1.0])
    against = svc.reference_agreement(spec(), {"m1": 1.0, "m3": 1.0, "m2": 9.0})
    assert against["kendall_tau"] == pytest.approx(-1.0) and against["kendall_tau_ci"][1] < 0
    assert "spearman_rho_ci" not in svc.reference_agreement(
        LeaderboardSpec(benchmark="tiny", judge="style", criteria=Criteria(("helpful",)), n_bootstrap=0),
        {"m1": 9.0, "m3": 9.0, "m2": 1.0})


def test_examples_of_the_baseline_say_it_is_the_baseline(home):
    with pytest.raises(ValueError, match="'base' is the baseline"):
        LeaderboardService(Store(home / "usl.sqlite")).examples(spec(), "base")


def test_a_wish_said_twice_in_other_case_or_spacing_counts_once():
    """"Be concise" and "be  concise" are one wish: the spec keeps its first spelling, in the user's order, so
    the board weighs it once and its cache key is the single wish's."""
    from usl.leaderboard.types import LeaderboardSpec
    from usl.types import Criteria

    spec = LeaderboardSpec(criteria=Criteria(("Be concise", "Uses examples", "be  concise"), ("Jargon", "JARGON ")))
    assert spec.criteria == Criteria(("Be concise", "Uses examples"), ("Jargon",))
    assert spec.criteria.key() == Criteria(("Uses examples", "Be concise"), ("Jargon",)).key()


def test_every_output_of_a_board_without_resamples_shows_no_interval():
    """JSON, records, the server's CSV and a board read back over HTTP: no interval where none was drawn,
    and the one drawn where it was."""
    from usl.leaderboard.remote import Remote
    from usl.leaderboard.types import Leaderboard, Row
    from usl.server.views import to_csv

    rows = (Row("a", 1, 60.0, (55.0, 65.0), 10), Row("b", 2, 40.0, (35.0, 45.0), 10))
    for n, drawn in ((0, False), (100, True)):
        lb = Leaderboard(spec={"n_bootstrap": n}, rows=rows)
        assert lb.has_interval is drawn
        assert [r["ci"] for r in lb.to_json()["rows"]] == ([[55.0, 65.0], [35.0, 45.0]] if drawn else [None, None])
        assert [(r["ci_low"], r["ci_high"]) for r in lb.records()] == (
            [(55.0, 65.0), (35.0, 45.0)] if drawn else [(None, None), (None, None)])
        first = to_csv(lb).splitlines()[1].split(",")
        assert first[3:5] == (["55.00", "65.00"] if drawn else ["", ""])
        back = Remote.__new__(Remote)._board(lb.to_json())
        assert back.rows[0].ci == ((55.0, 65.0) if drawn else (60.0, 60.0)) and back.has_interval is drawn
