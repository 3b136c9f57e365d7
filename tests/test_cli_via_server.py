"""`usl rank` asks a `usl serve` running on the same data directory, and ranks in-process otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from server_real import make_tiny, usl_serve

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def rank(home, *args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "usl.cli", "--home", str(home), "rank", "--benchmark", "tiny",
                           "--judge", "length", "--criteria", "Longer answers", "--format", "json", *args],
                          capture_output=True, text=True, env=env, timeout=120)


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
