"""Weights & Biases: one W&B run per harness run, `group` = the sweep (or the run's name)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.config.blocks import WandbOptions
from harness.core.errors import HarnessError
from harness.core.run_files import read_or_empty
from harness.core.secrets import scrub
from harness.interop.tracking import (
    REPORT_FILES,
    Status,
    cost_values,
    metric_values,
)

EXIT_CODES: dict[Status, int] = {"finished": 0, "incomplete": 1, "failed": 1, "interrupted": 130}


class WandbTracker:
    def __init__(self, options: WandbOptions, config: Mapping[str, Any], results: Path) -> None:
        try:
            import wandb
        except ImportError:
            raise HarnessError(
                "tracking: wandb needs the tracking extra: pip install 'bgm-judge[tracking]'"
            ) from None
        directory = (options.dir or results).absolute()  # wandb's service has its own cwd
        directory.mkdir(parents=True, exist_ok=True)
        command_line, sys.argv = sys.argv, [scrub(arg) for arg in sys.argv]  # W&B records it
        try:
            self.run: Any = wandb.init(
                project=options.project,
                entity=options.entity,
                group=str(config.get("sweep") or config.get("name")),
                name=str(config.get("name")),
                job_type="harness-run",
                tags=list(options.tags),
                config=dict(config),
                mode=options.mode,
                dir=str(directory),
                reinit="create_new",
                settings=wandb.Settings(console="off", save_code=False, x_disable_stats=True),
            )
        finally:
            sys.argv = command_line

    def log(self, folder: Path) -> None:
        metrics = metric_values(read_or_empty(folder / "metrics.json"))
        run_json = read_or_empty(folder / "run.json")
        values = metrics | cost_values(run_json)
        self.run.log(values)
        self.run.summary.update(values)
        self.run.config.update({"provenance": run_json.get("provenance") or {}})
        for name in REPORT_FILES:  # copied first: wandb.save then links nothing, nor says so
            if (folder / name).is_file():
                copied = shutil.copy(folder / name, Path(self.run.dir) / name)
                self.run.save(copied, base_path=self.run.dir, policy="now")

    def finish(self, status: Status, reason: str | None = None) -> None:
        self.run.summary["harness_status"] = status
        if reason:
            self.run.summary["harness_error"] = reason
        self.run.finish(exit_code=EXIT_CODES[status])
