"""AlpacaEval model outputs as a benchmark: the baseline's instructions are the queries.

Reads any of these layouts (plain or gzipped JSON):

* the shared copy: ``outputs/<model>.json.gz`` plus ``split.json`` (board/train indices,
  baseline, board models);
* the GitHub repository: ``results/<model>/model_outputs.json``;
* a folder of ``<model>.json`` files, or a single ``model_outputs.json`` (model from ``generator``).

Each file is AlpacaEval's ``model_outputs.json``: a list of ``{instruction, output, generator,
dataset}``. A query's id is the instruction's index in the baseline's file, as a string ("17"),
so ``split.json`` indices map onto ids directly. Other models' answers are matched to queries by
instruction text. Empty or absent outputs are missing answers: reported, never stored.

A URL source (``github:tatsu-lab/alpaca_eval``, ``https://github.com/owner/repo``, or any HTTP
folder with the shared layout) is first downloaded into the cache, then read the same way.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from usl.data.imported import Imported, count_missing
from usl.data.io import Fields, read_json
from usl.types import Benchmark, DataError, Query, Response

log = logging.getLogger(__name__)
DEFAULT_BASELINE = "gpt4_1106_preview"
DEFAULT_GITHUB = "github:tatsu-lab/alpaca_eval"
SPLITS = ("board", "train", "all")
_SUFFIXES = (".json.gz", ".json")


@dataclass(frozen=True)
class Split:
    """``split.json``: which instruction indices form the leaderboard (board) and which may train."""

    baseline: str
    board_models: tuple[str, ...]
    style_models: tuple[str, ...]
    board: tuple[int, ...]
    train: tuple[int, ...]


def read_split(path: str | Path) -> Split:
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise DataError("expected a JSON object", path=str(path))
    f = Fields(obj, path=str(path), line=None)

    def indices(field: str) -> tuple[int, ...]:
        xs = f.get(field, list)
        for i, x in enumerate(xs):
            if not isinstance(x, int) or isinstance(x, bool) or x < 0:
                raise f.error(f"{field}[{i}]", f"expected a non-negative integer, got {x!r}")
        if len(set(xs)) != len(xs):
            raise f.error(field, "duplicate indices")
        return tuple(xs)

    split = Split(f.string("baseline", nonempty=True), f.string_list("board_models"),
                  f.string_list("style_models", nonempty=False) if f.has("style_models") else (),
                  indices("board"), indices("train"))
    if set(split.board) & set(split.train):
        raise f.error("train", "shares indices with board: a board query must never be used for training")
    return split


def find_model_files(root: Path) -> dict[str, Path]:
    """Model name -> outputs file, for any of the supported layouts (see module docstring)."""
    if root.is_file():
        return {_name_of(root): root}
    if not root.is_dir():
        raise DataError("no such file or folder", path=str(root))
    found: dict[str, Path] = {}
    for folder in (root / "outputs", root):
        for p in sorted(folder.glob("*.json*")):
            name = _strip(p.name)
            if name and name not in ("split", "model_outputs") and name not in found:
                found[name] = p
    for p in sorted((root / "results").glob("*/model_outputs.json*")):
        if _strip(p.name) == "model_outputs":
            found.setdefault(p.parent.name, p)
    if (root / "model_outputs.json").is_file():
        p = root / "model_outputs.json"
        found.setdefault(_name_of(p), p)
    return found


def _strip(filename: str) -> str | None:
    for suf in _SUFFIXES:
        if filename.endswith(suf):
            return filename[: -len(suf)]
    return None


def _name_of(path: Path) -> str:
    """A lone ``model_outputs.json`` is named by its folder under ``results/``, else by ``generator``."""
    stem = _strip(path.name) or path.stem
    if stem != "model_outputs":
        return stem
    if path.parent.parent.name == "results":
        return path.parent.name
    items = read_json(path)
    if isinstance(items, list) and items and isinstance(items[0], dict) and isinstance(items[0].get("generator"), str):
        return items[0]["generator"]
    raise DataError("cannot tell the model's name: no 'generator' in the first item", path=str(path))


@dataclass(frozen=True)
class _Item:
    instruction: str
    output: str | None
    dataset: str


def read_outputs(path: Path) -> list[_Item]:
    """One ``model_outputs.json``: a list of objects with a string ``instruction`` and ``output``."""
    items = read_json(path)
    if not isinstance(items, list):
        raise DataError("expected a JSON list of {instruction, output}", path=str(path))
    out = []
    for i, obj in enumerate(items):
        if not isinstance(obj, dict):
            raise DataError("expected an object", path=str(path), field=f"[{i}]")
        f = Fields(obj, path=str(path), line=None, prefix=f"[{i}].")
        instruction = f.string("instruction", nonempty=True)
        output = f.get("output", (str, type(None)))
        dataset = f.string("dataset") if f.has("dataset") else ""
        out.append(_Item(instruction, output, dataset))
    return out


def _norm(text: str) -> str:
    return " ".join(text.split())


def load_alpaca_eval(source: str | Path, *, split: str | None = None, models: Sequence[str] | None = None,
                     baseline: str | None = None, name: str | None = None,
                     progress: bool = False) -> Imported:
    """Read a local AlpacaEval layout into a benchmark.

    ``split``: ``board`` (default when ``split.json`` is present), ``train`` or ``all`` (default
    without it). ``models``: defaults to the split's board models plus the baseline, or every file.
    """
    root = Path(source)
    files = find_model_files(root)
    split_file = root / "split.json" if root.is_dir() else None
    sp = read_split(split_file) if split_file and split_file.is_file() else None
    default = name or default_name(split or "board")  # an automatic split keeps the plain name
    if split is None:
        split = "board" if sp else "all"
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    if split != "all" and sp is None:
        raise DataError(f"--split {split} needs a split.json beside the outputs; use --split all", path=str(root))
    baseline = baseline or (sp.baseline if sp else DEFAULT_BASELINE)
    if baseline not in files:
        raise DataError(f"no outputs file for the baseline {baseline!r} (found: {', '.join(sorted(files)) or 'none'})",
                        path=str(root))
    wanted = list(models) if models else (list(sp.board_models) if sp else sorted(files, key=str.casefold))
    if baseline not in wanted:
        wanted.append(baseline)
    absent = [m for m in wanted if m not in files]
    if absent:
        raise DataError(f"no outputs file for model(s) {', '.join(absent)}", path=str(root))

    base_items = read_outputs(files[baseline])
    index: dict[str, int] = {}
    for i, it in enumerate(base_items):
        if _norm(it.instruction) in index:
            raise DataError(f"instruction repeated (first at [{index[_norm(it.instruction)]}])",
                            path=str(files[baseline]), field=f"[{i}].instruction")
        index[_norm(it.instruction)] = i
    chosen = range(len(base_items)) if split == "all" else (sp.board if split == "board" else sp.train)
    bad = [i for i in chosen if i >= len(base_items)]
    if bad:
        raise DataError(f"split index {bad[0]} is beyond the baseline's {len(base_items)} instructions",
                        path=str(split_file), field=split)
    queries = tuple(Query(str(i), base_items[i].instruction, base_items[i].dataset) for i in chosen)
    selected = {int(q.id) for q in queries}

    responses: list[Response] = []
    notes: list[str] = []
    iterator = wanted
    if progress:
        from tqdm import tqdm

        iterator = tqdm(wanted, desc="reading model outputs", unit="model", disable=None)
    for model in iterator:
        items = base_items if model == baseline else read_outputs(files[model])
        responses.extend(_match(model, items, index, selected, files[model], notes))
    responses.sort(key=lambda r: (int(r.query_id), r.model))
    bench = Benchmark(default, queries, tuple(sorted(wanted, key=str.casefold)), baseline)
    resp = tuple(responses)
    return Imported(bench, resp, f"alpaca_eval:{root} split={split}", count_missing(bench, resp), tuple(notes))


def default_name(split: str) -> str:
    return "alpaca_eval" if split == "board" else f"alpaca_eval_{split}"


def _match(model: str, items: list[_Item], index: dict[str, int], selected: set[int], path: Path,
           notes: list[str]) -> list[Response]:
    seen: set[int] = set()
    out, unknown, dups = [], 0, 0
    for it in items:
        i = index.get(_norm(it.instruction))
        if i is None:
            unknown += 1
            continue
        if i in seen:
            dups += 1
            continue
        seen.add(i)
        if i in selected and it.output is not None and it.output.strip():
            out.append(Response(str(i), model, it.output))
    if unknown:
        notes.append(f"{model}: {unknown} instruction(s) not in the baseline's file were skipped ({path.name})")
    if dups:
        notes.append(f"{model}: {dups} repeated instruction(s) ignored (first answer kept)")
    return out


# --- download -------------------------------------------------------------------------------------

def is_remote(source: str) -> bool:
    return source.startswith(("github:", "http://", "https://"))


def fetch(source: str, cache_root: Path, *, models: Sequence[str] | None = None, client=None,
          progress: bool = False) -> Path:
    """Download the files a local import needs into ``cache_root/<hash>/`` and return that folder.

    The folder gets the shared layout (``split.json`` when the source has one, ``outputs/<m>.json``),
    so ``load_alpaca_eval`` reads it exactly as it reads a local copy. Files already downloaded are
    kept: an interrupted download resumes.
    """
    import httpx

    raw_base, listing = _remote_urls(source)
    dest = cache_root / hashlib.sha256(source.encode()).hexdigest()[:16]
    (dest / "outputs").mkdir(parents=True, exist_ok=True)
    own = client is None
    client = client or httpx.Client(timeout=60.0, follow_redirects=True)
    try:
        wanted = list(models or [])
        split = _get(client, raw_base + "split.json")
        if split is not None:
            _write(dest / "split.json", split)
            sp = read_split(dest / "split.json")
            wanted = wanted or [*sp.board_models, sp.baseline]
        elif not wanted and listing:
            r = client.get(listing)
            r.raise_for_status()
            wanted = sorted(e["name"] for e in r.json() if e.get("type") == "dir")
        if not wanted:
            raise DataError("the source has no split.json: name the models to download with --models",
                            path=source)
        iterator = wanted
        if progress:
            from tqdm import tqdm

            iterator = tqdm(wanted, desc="downloading model outputs", unit="model", disable=None)
        for m in iterator:
            if any((dest / "outputs" / f"{m}{s}").is_file() for s in _SUFFIXES):
                continue
            for rel, suffix in ((f"outputs/{m}.json.gz", ".json.gz"), (f"outputs/{m}.json", ".json"),
                                (f"results/{m}/model_outputs.json", ".json")):
                body = _get(client, raw_base + rel)
                if body is not None:
                    _write(dest / "outputs" / f"{m}{suffix}", body)
                    break
            else:
                raise DataError(f"no outputs found for model {m!r}", path=source)
    except httpx.HTTPError as e:
        raise DataError(f"download failed: {e}", path=source) from e
    finally:
        if own:
            client.close()
    return dest


def _remote_urls(source: str) -> tuple[str, str | None]:
    """(base URL for raw files, GitHub contents-API URL listing ``results/`` or None)."""
    repo = None
    if source.startswith("github:"):
        repo = source[len("github:"):]
    elif source.startswith("https://github.com/"):
        repo = source[len("https://github.com/"):].rstrip("/")
    if repo is None:
        return source.rstrip("/") + "/", None
    repo, _, ref = repo.partition("@")
    ref = ref or "main"
    if repo.count("/") != 1:
        raise DataError("expected github:OWNER/REPO[@REF]", path=source)
    return (f"https://raw.githubusercontent.com/{repo}/{ref}/",
            f"https://api.github.com/repos/{repo}/contents/results?ref={ref}")


def _get(client, url: str) -> bytes | None:
    r = client.get(url)
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return r.content


def _write(path: Path, body: bytes) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(body)
    tmp.replace(path)  # atomic: a half-written file never looks complete
