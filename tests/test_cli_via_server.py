"""`usl rank`, `usl compare`, `--reference`, `--spec` and the Python API ask a `usl serve` running on the same
data directory, and rank in-process otherwise; a name the server refuses is a final error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from server_real import make_tiny, usl_serve

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def usl(home, *args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "usl.cli", "--home", str(home), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def rank(home, *args):
    return usl(home, "rank", "--benchmark", "tiny", "--judge", "length", "--criteria", "Longer answers",
               "--format", "json", *args)


def compare(home, *args):
    return usl(home, "compare", "--benchmark", "tiny", "--judge", "length", "--a-criteria", "Longer answers",
               "--b-criteria", "Short answers", "--json", *args)


SERVE_TINY = ("--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none")


def test_rank_goes_through_a_running_server_with_the_same_board(tmp_path):
    make_tiny(tmp_path)
    alone = rank(tmp_path)
    assert alone.returncode == 0 and "ranked by usl serve" not in alone.stderr, alone.stderr
    with usl_serve(tmp_path, "--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        assert json.loads((tmp_path / "serve.json").read_text())["url"] == url
        served = rank(tmp_path)
        assert served.returncode == 0, served.stderr
        assert f"ranked by usl serve at {url}" in served.stderr
        assert json.loads(served.stdout)["rows"] == json.loads(alone.stdout)["rows"]
        forced = rank(tmp_path, "--no-server")
        assert "ranked by usl serve" not in forced.stderr and json.loads(forced.stdout)["rows"] == json.loads(alone.stdout)["rows"]
        # what the server cannot rank as the command would (another bootstrap) is ranked here
        assert "ranked by usl serve" not in rank(tmp_path, "--seed", "1").stderr
    # withdrawn at a graceful exit; a server killed first (slow shutdown on a busy machine) leaves a record of
    # a process that is gone, which rank ignores
    record = tmp_path / "serve.json"
    assert not record.exists() or not _alive(json.loads(record.read_text())["pid"])
    after = rank(tmp_path)
    assert after.returncode == 0 and "ranked by usl serve" not in after.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def test_a_stale_record_is_ignored(tmp_path):
    make_tiny(tmp_path)
    (tmp_path / "serve.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 2 ** 22 + 17}))
    r = rank(tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["rows"]


def test_a_running_server_ranks_a_model_added_and_removed_from_the_shell(tmp_path):
    """The server keeps finished boards; once `usl data add-model` (another process) changes the data,
    the same criteria and the default board are ranked again, with the new model, and without it once
    it is removed."""
    import httpx

    make_tiny(tmp_path)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def data(*args):
        r = subprocess.run([sys.executable, "-m", "usl.cli", "--home", str(tmp_path), "data", *args,
                            "--benchmark", "tiny"], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        return r

    own = tmp_path / "m_new.jsonl"
    own.write_text("".join(json.dumps({"instruction": f"Write a poem number {i}", "output": "new " * 30}) + "\n"
                           for i in range(8, 16)))
    with usl_serve(tmp_path, "--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        def models(board: dict) -> set[str]:
            return {row["model"] for row in board["rows"]}

        def default() -> set[str]:
            return models(httpx.get(url + "/api/leaderboard", timeout=60).json()["leaderboard"])

        before = models(json.loads(rank(tmp_path).stdout))
        assert default() == before and "m_new" not in before
        data("add-model", str(own), "--judge", "none")
        served = rank(tmp_path)
        assert "ranked by usl serve" in served.stderr
        assert models(json.loads(served.stdout)) == before | {"m_new"} == default()
        data("remove-model", "m_new")
        assert models(json.loads(rank(tmp_path).stdout)) == before == default()


def test_compare_and_a_saved_spec_go_through_the_server_with_the_same_result(tmp_path):
    make_tiny(tmp_path)
    alone = compare(tmp_path, "--topics", "cod")
    assert alone.returncode == 0, alone.stderr
    saved = tmp_path / "board.json"
    saved.write_text(rank(tmp_path, "--topics", "Creative").stdout)
    with usl_serve(tmp_path, *SERVE_TINY) as url:
        served = compare(tmp_path, "--topics", "cod")
        assert served.returncode == 0, served.stderr
        assert f"compared by usl serve at {url}" in served.stderr
        assert json.loads(served.stdout) == json.loads(alone.stdout)
        assert json.loads(served.stdout)["a"]["spec"]["topics"] == ["coding"]     # the prefix, as an id
        again = usl(tmp_path, "rank", "--spec", str(saved), "--format", "json")
        assert f"ranked by usl serve at {url}" in again.stderr and "warning" not in again.stderr, again.stderr
        assert json.loads(again.stdout)["rows"] == json.loads(saved.read_text())["rows"]
        assert json.loads(again.stdout)["spec"]["topics"] == ["writing"]
        forced = compare(tmp_path, "--topics", "cod", "--no-server")
        assert "compared by usl serve" not in forced.stderr and json.loads(forced.stdout) == json.loads(alone.stdout)


def _error_line(r) -> str:
    """The one line a refused command prints: nothing loaded, nothing judged, no fallback logged."""
    assert r.returncode == 2 and not r.stdout, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


NAME_ERRORS = [
    (("rank", "--benchmark", "tiny", "--topics", "astrology"),
     "error: unknown topic 'astrology'; topics (id and name): coding (Coding), writing (Creative writing)"),
    (("rank", "--benchmark", "tiny", "--baseline", "nobody"),
     "error: baseline 'nobody' is not a model of benchmark 'tiny'; models: base, m_code, m_mid, m_write"),
    (("rank", "--benchmark", "tiny", "--reference", "alpaca_eval_3"),
     "error: unknown reference leaderboard 'alpaca_eval_3'; known: alpaca_eval_2, alpaca_eval_2_raw, alpaca_eval_1"),
    (("compare", "--benchmark", "tiny", "--a-criteria", "x", "--b-criteria", "y", "--topics", "cod,astro"),
     "error: unknown topic 'astro'; topics (id and name): coding (Coding), writing (Creative writing)"),
]


@pytest.mark.parametrize("args, line", NAME_ERRORS)
def test_a_misspelt_name_fails_at_once_listing_the_known_ones_without_loading_the_judge(tmp_path, args, line):
    """The default judge (MiniLM, seconds to load) is named: a check made after loading it would log the load."""
    make_tiny(tmp_path)
    assert _error_line(usl(tmp_path, *args, "--judge", "default", "--no-server")) == line


@pytest.mark.parametrize("args, line", NAME_ERRORS + [
    (("rank", "--benchmark", "nope"), "error: unknown benchmark 'nope'; known: tiny"),
    (("rank", "--benchmark", "tiny", "--criteria", "w" * 301), "error: --criteria #1: 301 characters; at most 300")])
def test_a_refused_input_imports_neither_the_engine_nor_the_judge(tmp_path, args, line):
    """Checked before anything loads, in a fresh process as a user runs it: the engine's and the default
    judge's modules (and the runtimes under them) are never imported."""
    make_tiny(tmp_path)
    code = ("import sys\nfrom usl.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n    status = e.code\n"
            "print(sorted(m for m in ('usl.leaderboard.service', 'usl.judges.fast', 'onnxruntime', 'torch') "
            "if m in sys.modules))\nsys.exit(status)")
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code, "--home", str(tmp_path), *args, "--judge", "default",
                        "--no-server"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == line, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("args, line", NAME_ERRORS + [
    (("rank", "--benchmark", "nope"), "error: unknown benchmark 'nope'; known: tiny")])
def test_a_name_the_server_refuses_is_final(tmp_path, args, line):
    """The server's 422 is the answer: the command neither falls back to ranking here nor says it tried."""
    make_tiny(tmp_path)
    with usl_serve(tmp_path, *SERVE_TINY):
        assert _error_line(usl(tmp_path, *args, "--judge", "length")) == line


def test_remote_raises_refused_on_a_422_and_gives_way_on_what_it_cannot_rank(tmp_path):
    from usl.leaderboard.remote import Refused, connect
    from usl.leaderboard.types import LeaderboardSpec

    make_tiny(tmp_path)
    assert connect(tmp_path) is None
    with usl_serve(tmp_path, *SERVE_TINY):
        remote = connect(tmp_path)
        with pytest.raises(Refused, match=r"unknown topic 'astrology'; topics \(id and name\): coding \(Coding\)"):
            remote.rank(LeaderboardSpec(benchmark="tiny", judge="length", topics=("astrology",)))
        assert remote.rank(LeaderboardSpec(benchmark="tiny", judge="random")) is None        # not served there
        assert remote.rank(LeaderboardSpec(benchmark="tiny", judge="length", seed=3)) is None  # another bootstrap
        assert [r.model for r in remote.rank(LeaderboardSpec(benchmark="tiny", judge="length")).rows] == \
            ["m_mid", "m_code", "m_write"]


REF_MODELS = ("gpt4_1106_preview", "gpt-3.5-turbo-1106", "Mixtral-8x7B-Instruct-v0.1", "Meta-Llama-3-70B-Instruct",
              "claude-3-opus-20240229")


def _make_ref_bench(home) -> None:
    """Five models AlpacaEval 2 ranks, with answers whose lengths the ``length`` judge orders."""
    from usl.store import Store
    from usl.store.benchmarks import save_benchmark
    from usl.types import Benchmark, Query, Response

    queries = tuple(Query(f"q{i}", f"Explain topic number {i}") for i in range(12))
    words = {m: 10 + 3 * k for k, m in enumerate(REF_MODELS)}
    resp = [Response(q.id, m, " ".join(["w"] * (words[m] + (i * k) % 7)))
            for i, q in enumerate(queries) for k, m in enumerate(REF_MODELS)]
    store = Store(home / "usl.sqlite")
    save_benchmark(store, Benchmark("refs", queries, tuple(sorted(REF_MODELS)), REF_MODELS[0]), resp, source="test")
    store.close()


def test_reference_goes_through_the_server_with_the_same_agreement(tmp_path):
    _make_ref_bench(tmp_path)
    args = ("rank", "--benchmark", "refs", "--judge", "length", "--reference", "alpaca_eval_2", "--format", "json")
    alone = usl(tmp_path, *args)
    assert alone.returncode == 0, alone.stderr
    found = json.loads(alone.stdout)["reference"]
    assert found["name"] == "alpaca_eval_2" and found["n_models"] == 4 and "spearman_rho_ci" in found
    with usl_serve(tmp_path, "--no-import", "--benchmark", "refs", "--judge", "length", "--refine-with", "none") as url:
        served = usl(tmp_path, *args)
        assert served.returncode == 0 and f"ranked by usl serve at {url}" in served.stderr, served.stderr
        assert json.loads(served.stdout)["reference"] == found
        assert json.loads(served.stdout)["rows"] == json.loads(alone.stdout)["rows"]


def test_the_python_api_uses_the_server_and_its_refusals(tmp_path):
    import usl as api

    make_tiny(tmp_path)
    here = api.load(home=tmp_path, server=False)
    alone = here.rank(["Longer answers"], judge="length", topics=["writ"])
    with usl_serve(tmp_path, *SERVE_TINY):
        bench = api.load(home=tmp_path)
        served = bench.rank(["Longer answers"], judge="length", topics=["writ"])
        assert served.rows == alone.rows and served.spec["topics"] == alone.spec["topics"] == ["writing"]
        assert bench._engine is None                   # nothing was loaded in this process
        cmp = bench.compare(["Longer answers"], ["Short answers"], judge="length")
        assert cmp.kendall_tau == here.compare(["Longer answers"], ["Short answers"], judge="length").kendall_tau
        assert bench._engine is None
        with pytest.raises(ValueError, match="unknown topic 'astrology'; topics"):
            bench.rank(["x"], judge="length", topics=["astrology"])
