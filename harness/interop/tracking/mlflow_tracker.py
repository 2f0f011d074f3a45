"""MLflow: one MLflow run per harness run in the experiment named after the sweep, tagged
`harness.sweep`. A local folder (`tracking_uri: mlruns` or `file:...`) is MLflow's file store,
which MLflow 3 keeps in maintenance mode behind MLFLOW_ALLOW_FILE_STORE: the harness sets that
for a local folder (mlflow-skinny has no SQL store)."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.run_files import read_or_empty
from harness.interop.tracking import (
    REPORT_FILES,
    Status,
    cost_values,
    flatten,
    metric_values,
)

STATUSES: dict[Status, str] = {
    "finished": "FINISHED",
    "incomplete": "FAILED",
    "failed": "FAILED",
    "interrupted": "KILLED",
}
MAX_PARAM = 6000  # MLflow's limit on a parameter's value
MAX_KEY = 250  # and on a metric's name


def tracking_uri(uri: str) -> str:
    """A local folder as a file: URI (and the file store allowed); other URIs as given."""
    if "://" in uri or uri.startswith(("file:", "databricks")):
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        # A server that is down is a failed run start in seconds, not MLflow's minutes of
        # retries (the user's own settings of these win).
        for name, value in (("MAX_RETRIES", "2"), ("BACKOFF_FACTOR", "1"), ("TIMEOUT", "20")):
            os.environ.setdefault(f"MLFLOW_HTTP_REQUEST_{name}", value)
        return uri
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return Path(uri).resolve().as_uri()


class MlflowTracker:
    def __init__(self, uri: str, experiment: str | None, config: Mapping[str, Any]) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise HarnessError(
                "tracking: mlflow needs the tracking extra: pip install 'bgm-judge[tracking]'"
            ) from None
        self.client = MlflowClient(tracking_uri(uri))
        sweep = config.get("sweep")
        name = experiment or str(sweep or config.get("name"))
        found = self.client.get_experiment_by_name(name)
        experiment = found.experiment_id if found else self.client.create_experiment(name)
        tags = {"harness.runs": str(config.get("name")), "harness.status": "running"}
        if sweep:
            tags["harness.sweep"] = str(sweep)
        run = self.client.create_run(experiment, run_name=str(config.get("name")), tags=tags)
        self.run_id = run.info.run_id
        params = [(key, json_text(value)) for key, value in flatten(config)]
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in params])

    def log(self, folder: Path) -> None:
        from mlflow.entities import Metric

        run_json = read_or_empty(folder / "run.json")
        values = metric_values(read_or_empty(folder / "metrics.json")) | cost_values(run_json)
        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_key(k), v, now, 0) for k, v in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)
        self.client.log_dict(self.run_id, run_json.get("provenance") or {}, "provenance.json")
        for name in REPORT_FILES:
            if (folder / name).is_file():
                self.client.log_artifact(self.run_id, str(folder / name))

    def finish(self, status: Status, reason: str | None = None) -> None:
        self.client.set_tag(self.run_id, "harness.status", status)
        if reason:
            self.client.set_tag(self.run_id, "harness.error", reason[:MAX_PARAM])
        self.client.set_terminated(self.run_id, STATUSES[status])


def json_text(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text[:MAX_PARAM]


def mlflow_key(key: str) -> str:
    """MLflow keys allow letters, digits, `_ - . / : space`, at most 250 characters, and no
    path that reads as another (`group/../ndcg`): `@` (ndcg@10) becomes `_at_`, anything else
    (in an item group's name) `_`, a `.`, `..` or empty segment `_`, and a long key keeps its
    start and its metric's name around a digest of the whole."""
    key = re.sub(r"[^\w\-. /:]", "_", key.replace("@", "_at_"))
    key = "/".join(part if part.strip(".") else "_" for part in key.split("/"))
    if len(key) > MAX_KEY:
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        key = f"{key[: MAX_KEY - 80]}_{digest}_{key[-60:]}"
    return key
