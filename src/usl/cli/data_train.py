"""`usl data build-train` (criteria-conditioned CRM training data) and `usl data criteria`
(ask an LLM API which criteria would explain a labelled pair, as the paper did)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from usl.cli.common import user_errors


def register(app: typer.Typer) -> None:
    @app.command("build-train")
    def build_train(
        source: Optional[str] = typer.Option(None, "--source", help="Shared data directory (default ../shared/data)."),
        out: str = typer.Option("artifacts/data", "--out", help="Output directory."),
        seed: int = typer.Option(0, "--seed", help="Seed of every split, sample and answer position."),
        max_per_source: int = typer.Option(3000, "--max-per-source", min=1, help="Most training samples from one source."),
        holdout_family: str = typer.Option("domain_literature", "--holdout-family",
                                           help="Criteria family kept out of training ('' = none)."),
        holdout_topic: str = typer.Option("food", "--holdout-topic", help="Topic kept out of training ('' = none)."),
        terse_per_query: int = typer.Option(0, "--terse-per-query", min=0, help=(
            "Pairs per training query of a bare answer against one that gives it at length (0 = none; "
            "they cost style pairs 1.4-3.2 points).")),
        wish_quality_train: int = typer.Option(0, "--wish-quality-train", min=0, help=(
            "Most training samples per LLM-judge source whose two answers both fit one length wish, under it, "
            "the better answer the label (0 = none).")),
    ) -> None:
        """Build train/dev JSONL (paper format) and our eval files from the public data."""
        from usl.data.build_train import BuildConfig, build

        with user_errors():
            cfg = BuildConfig(source=source or "", out=out, seed=seed, max_per_source=max_per_source,
                              holdout_family=holdout_family, holdout_topic=holdout_topic,
                              terse_per_query=terse_per_query, wish_quality_train=wish_quality_train)
            res = build(cfg)
        for name, c in res.counts.items():
            if "_total" in c:
                typer.echo(f"{name:>18}: {c['_total']:6d} samples")
        typer.echo(f"wrote {res.out} in {res.seconds:.1f}s (manifest.json has counts per source)")

    @app.command("criteria")
    def criteria(
        pair_file: str = typer.Argument(..., help="Paper-format JSONL; criteria are asked for each pair."),
        out: str = typer.Option(..., "--out", help="Where to write the pairs with extracted criteria."),
        base_url: str = typer.Option("https://api.openai.com/v1", "--base-url",
                                     help="OpenAI-compatible API root."),
        model: str = typer.Option("gpt-4o-mini", "--model", help="Chat model name."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help="Environment variable that holds the API key."),
        limit: int = typer.Option(0, "--limit", min=0, help="Only the first N pairs (0 = all)."),
    ) -> None:
        """Extract user criteria for labelled pairs through an LLM API (the paper's procedure)."""
        import os

        from usl.data.criteria_llm import CriteriaExtractor, ExtractorConfig, extract_file

        with user_errors():
            key = os.environ.get(api_key_env, "")
            ext = CriteriaExtractor(ExtractorConfig(base_url=base_url, model=model, api_key=key))
            n = extract_file(ext, pair_file, out, limit=limit or None)
        typer.echo(json.dumps({"written": n, "out": out}))
