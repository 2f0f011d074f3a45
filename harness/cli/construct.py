"""`harness construct`: one subcommand per construction stage, and `all` from a build file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import EXIT_INCOMPLETE, CacheDirOption, console, err_console, user_errors
from harness.core.sanitize import terminal_text

app = typer.Typer(
    help="Build a DialBGM-style benchmark from MusicCaps and DailyDialog, stage by stage.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Build file (YAML); its section for this stage is used."),
]
OverwriteOption = Annotated[
    bool,
    typer.Option("--overwrite", help="Replace an output dataset folder an earlier build wrote."),
]


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line (those not None)."""
    return {name: value for name, value in options.items() if value is not None}


def _show(title: str, fields: dict[str, Any], report_path: Path) -> None:
    console.print(f"[bold]{terminal_text(title)}[/]")
    for name, value in fields.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        console.print(f"  {name}: {terminal_text(shown)}", highlight=False, soft_wrap=True)
    console.print(f"[dim]  full report: {terminal_text(report_path)}[/]")


def _stage1(csv_path: Path, out: Path, config: Any) -> None:
    from harness.construct.stage1 import run_stage1

    report = run_stage1(csv_path, out, config)
    _show(
        "stage 1: BGM suitability filter",
        {
            "clips in": report["n_input"],
            "kept": report["n_kept"],
            "removed by rule": report["removed_by_rule"],
            "removed (first rule)": report["removed_first_rule"],
            "kept thanks to negation": report["kept_thanks_to_negation"],
            **(
                {"heard vocals (audio)": report["audio_vocals"]["removed"]}
                if "audio_vocals" in report
                else {}
            ),
        },
        out / "report.json",
    )


def _stage2(source: Path, out: Path, config: Any, cache_dir: Path | None) -> bool:
    from harness.construct.stage2 import run_stage2

    report = run_stage2(source, out, config, cache_dir=cache_dir)
    captions = report["captions"]
    _show(
        "stage 2: dialogues",
        {
            "read": report["stats_read"],
            "label mismatches": report["label_mismatches"],
            "duplicates removed": report["duplicates_removed"],
            "removed by filter": report["removed_by_filter"],
            "kept": report["stats_kept"],
            "selected": report["stats_selected"],
            "captions": (
                "none (no provider)"
                if captions is None
                else {k: captions[k] for k in ("captioned", "cached", "model_calls", "failed")}
            ),
        },
        out / "report.json",
    )
    if captions and captions["failed"]:
        err_console.print(
            f"[bold yellow]incomplete:[/] {captions['failed']} caption(s) failed; see "
            f"{out / 'report.json'}. Re-run to retry (answers received come from the cache)."
        )
        return False
    return True


def _stage3(
    clips: Path, dialogues: Path, audio_dir: Path, out: Path, config: Any, **kwargs: Any
) -> None:
    from harness.construct.stage3 import run_stage3

    report = run_stage3(clips, dialogues, audio_dir, out, config, **kwargs)
    _show(
        "stage 3: candidates",
        {
            "items": report["n_items"],
            "clips eligible (with audio)": report["n_clips_eligible"],
            "clips excluded": report["clips_excluded"],
            "pool (top share)": report["pool_size"],
            "clips used": report["n_clips_used"],
            "dataset": str(out),
        },
        out / "build.json",
    )


def _stage4(dataset: Path, out: Path, config: Any, overwrite: bool) -> None:
    from harness.construct.stage4 import run_stage4

    report = run_stage4(dataset, out, config, overwrite=overwrite)
    _show(
        "stage 4: consensus and agreement",
        {
            "items": report["n_items"],
            "with enough annotations": report["n_annotated"],
            "dropped (W below min)": report["dropped_w_below_min"],
            "dropped (bottom share)": report["dropped_bottom_share"],
            "kept": report["n_kept"],
            "W before filtering": report["w_before_filtering"],
            "W after filtering": report["w_after_filtering"],
        },
        out / "build.json",
    )


@app.command()
@user_errors
def stage1(
    musiccaps: Annotated[Path, typer.Argument(help="MusicCaps-format CSV.")],
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("build/stage1"),
    config: ConfigOption = None,
    check_caption: Annotated[
        bool | None, typer.Option(help="Also apply the rules to captions.")
    ] = None,
    vocals_audio_dir: Annotated[
        Path | None,
        typer.Option(
            help="Also remove clips the musicnn tagger hears a voice in (folder of <id>.wav)."
        ),
    ] = None,
    vocals_threshold: Annotated[
        float | None, typer.Option(help="Least vocal-tag probability for --vocals-audio-dir.")
    ] = None,
) -> None:
    """Keep the clips fit to play under talk: no vocals, speech, noise or sound effects."""
    from harness.construct.audio_tags import AudioVocalsConfig
    from harness.construct.config import load_build_config

    settings = load_build_config(config).stage1
    update = _given(check_caption=check_caption)
    if vocals_audio_dir is not None:
        vocals = _given(audio_dir=vocals_audio_dir, threshold=vocals_threshold)
        update["audio_vocals"] = AudioVocalsConfig.model_validate(vocals)
    _stage1(musiccaps, out, settings.model_copy(update=update))


@app.command()
@user_errors
def stage2(
    dailydialog: Annotated[
        Path, typer.Argument(help="DailyDialog folder or dialogues_*.txt file.")
    ],
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("build/stage2"),
    config: ConfigOption = None,
    provider: Annotated[
        str | None, typer.Option(help="Captioning provider (registry name).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Captioning model id.")] = None,
    sample: Annotated[int | None, typer.Option(help="Keep a seeded sample of N.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the sample.")] = None,
    cache_dir: CacheDirOption = None,
) -> None:
    """Read and filter DailyDialog; caption each dialogue with the summariser prompt."""
    from harness.construct.config import load_build_config
    from providers import provider_options

    settings = load_build_config(config).stage2
    update = _given(sample=sample, seed=seed)
    if provider is not None:
        block = {"name": provider, "model": model}
        update["provider"] = provider_options(block, source="--provider", field="provider")
    if not _stage2(dailydialog, out, settings.model_copy(update=update), cache_dir):
        raise typer.Exit(EXIT_INCOMPLETE)


@app.command()
@user_errors
def stage3(
    clips: Annotated[Path, typer.Option(help="Stage-1 kept.jsonl.")],
    dialogues: Annotated[Path, typer.Option(help="Stage-2 dialogues.jsonl.")],
    audio_dir: Annotated[Path, typer.Option(help="Folder of <clip id>.wav (or flac/ogg/mp3).")],
    out: Annotated[Path, typer.Option(help="Dataset folder to write.")] = Path("build/dataset"),
    config: ConfigOption = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the 1+3 draws.")] = None,
    query: Annotated[
        str | None, typer.Option(help="Embed the dialogue 'summary' or the 'dialogue' text.")
    ] = None,
    embedder: Annotated[
        str | None, typer.Option(help="'sentence-transformers' (offline) or 'openai'.")
    ] = None,
    embedding_model: Annotated[str | None, typer.Option(help="Embedding model.")] = None,
    cache_dir: CacheDirOption = None,
    overwrite: OverwriteOption = False,
) -> None:
    """Pick four candidates per dialogue (top-1 + 3 from the top 10%); write the dataset."""
    from harness.construct.config import load_build_config
    from harness.core.errors import HarnessError

    settings = load_build_config(config).stage3
    if query not in (None, "summary", "dialogue"):
        raise HarnessError(f"--query must be 'summary' or 'dialogue', not {query!r}")
    if embedder not in (None, "sentence-transformers", "openai"):
        raise HarnessError(f"--embedder must be sentence-transformers or openai: {embedder!r}")
    update = _given(seed=seed, query=query)
    embed_update = _given(kind=embedder, model=embedding_model)
    if embed_update:
        update["embedder"] = settings.embedder.model_copy(update=embed_update)
    _stage3(
        clips,
        dialogues,
        audio_dir,
        out,
        settings.model_copy(update=update),
        cache_dir=cache_dir,
        overwrite=overwrite,
    )


@app.command()
@user_errors
def stage4(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder whose items have annotations.")],
    out: Annotated[Path, typer.Option(help="Final dataset folder to write.")] = Path("build/final"),
    config: ConfigOption = None,
    min_w: Annotated[float | None, typer.Option(help="Drop items with Kendall's W below.")] = None,
    drop_bottom: Annotated[
        float | None, typer.Option(help="Also drop this share of lowest-W items.")
    ] = None,
    overwrite: OverwriteOption = False,
) -> None:
    """Consensus rankings (Borda count, hierarchical tie-break) and agreement filtering."""
    from harness.construct.config import load_build_config

    settings = load_build_config(config).stage4
    update = _given(min_w=min_w, drop_bottom=drop_bottom)
    _stage4(dataset, out, settings.model_copy(update=update), overwrite)


@app.command("all")
@user_errors
def run_all(
    config: Annotated[Path, typer.Argument(help="Build file (YAML).")],
    cache_dir: CacheDirOption = None,
    overwrite: OverwriteOption = False,
) -> None:
    """Stages 1-3 from the build file (and stage 4 when it names an annotated dataset)."""
    from harness.construct.config import load_build_config

    build = load_build_config(config)
    build.require("musiccaps", "dailydialog", "audio_dir")
    assert build.musiccaps and build.dailydialog and build.audio_dir
    stage2_config, stage3_config = build.seeded()
    _stage1(build.musiccaps, build.out / "stage1", build.stage1)
    if not _stage2(build.dailydialog, build.out / "stage2", stage2_config, cache_dir):
        raise typer.Exit(EXIT_INCOMPLETE)
    _stage3(
        build.out / "stage1/kept.jsonl",
        build.out / "stage2/dialogues.jsonl",
        build.audio_dir,
        build.out / "dataset",
        stage3_config,
        cache_dir=cache_dir,
        overwrite=overwrite,
    )
    if build.annotated is not None:
        _stage4(build.annotated, build.out / "final", build.stage4, overwrite)


@app.command("refine-set")
@user_errors
def refine_set(
    musiccaps: Annotated[Path, typer.Option(help="MusicCaps-format CSV (musiccaps-public.csv).")],
    out: Annotated[Path, typer.Option(help="Dataset folder to write.")],
    pool: Annotated[int, typer.Option(help="Candidates per item, the gold included.")] = 500,
    items: Annotated[int, typer.Option(help="Items (one gold clip each).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of every draw.")] = 0,
    query_aspects: Annotated[
        int, typer.Option(help="Gold aspects named in the turn-1 request.")
    ] = 2,
    min_aspects: Annotated[int, typer.Option(help="Aspects a clip needs to be used.")] = 4,
    overwrite: OverwriteOption = False,
) -> None:
    """A two-turn refinement set (`protocol: refine`): pools of text-only MusicCaps captions,
    one gold each, a request naming part of the gold's aspects."""
    from harness.construct.refine_set import refine_set_config, run_refine_set

    config = refine_set_config(
        pool=pool, items=items, seed=seed, query_aspects=query_aspects, min_aspects=min_aspects
    )
    report = run_refine_set(musiccaps, out, config, overwrite=overwrite)
    _show(
        "refine set",
        {k: report[k] for k in ("n_rows", "n_items", "n_clips", "pool")} | {"dataset": str(out)},
        out / "build.json",
    )
