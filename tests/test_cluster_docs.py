"""docs/cluster.md's Slurm array script and its re-run command, run verbatim under the
environment Slurm gives each array task (`vllm`, `curl` and `harness` stand-ins record what
they are asked): every task, first submitted or re-submitted alone, runs its own shard of the
array's count, exports the folder that shard writes, and the merge's glob finds it."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.config.loading import load_experiments
from harness.core.sharding import Shard
from harness.runs.runner import run_folder

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8")
STAND_INS = {
    "vllm": "exit 0",
    "curl": "exit 0",
    "harness": 'printf "%s\\0" "$@" >> "$CALLS"; printf "\\n" >> "$CALLS"',
}


def _script() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", PAGE, flags=re.DOTALL)
    return str(next(block for block in blocks if block.startswith("#!/bin/bash")))


def _tasks(array: str) -> list[int]:
    """The task ids of an `--array` value (`0-7`, `3`, `1,4-5`)."""
    ids: list[int] = []
    for part in array.split(","):
        first, _, last = part.partition("-")
        ids += range(int(first), int(last or first) + 1)
    return ids


def _submit(script: str, command: str, tmp_path: Path) -> list[list[str]]:
    """What `sbatch` does with `command` (`sbatch [--array=...] shards.sbatch`): each task of
    the array (the command's --array, else the script's #SBATCH line) runs the script with
    Slurm's variables; the `harness` calls they made, as argument lists."""
    words = shlex.split(command)
    given = [w.split("=", 1)[1] for w in words if w.startswith("--array=")]
    (array,) = given or re.findall(r"^#SBATCH --array=(\S+)", script, flags=re.MULTILINE)
    tasks = _tasks(array)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STAND_INS.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "shards.sbatch").write_text(script)
    calls = tmp_path / "calls"
    calls.write_bytes(b"")
    for task in tasks:
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "CALLS": str(calls),
            "TMPDIR": str(tmp_path / "tmp"),
            "SLURM_SUBMIT_DIR": str(tmp_path),
            "SLURM_JOB_ID": "1000",
            "SLURM_ARRAY_JOB_ID": "1000",
            "SLURM_ARRAY_TASK_ID": str(task),
            "SLURM_ARRAY_TASK_COUNT": str(len(tasks)),
            "SLURM_ARRAY_TASK_MIN": str(min(tasks)),
            "SLURM_ARRAY_TASK_MAX": str(max(tasks)),
        }
        subprocess.run(["bash", "shards.sbatch"], cwd=tmp_path, env=env, check=True)
    lines = calls.read_bytes().split(b"\0\n")
    return [[a.decode() for a in line.split(b"\0")] for line in lines if line]


@pytest.mark.parametrize(
    "command",
    [
        "sbatch --parsable shards.sbatch",
        *re.findall(r"`(sbatch --array=\S+ shards\.sbatch)`", PAGE),
    ],
)
def test_every_task_runs_its_shard_of_the_arrays_count(command: str, tmp_path: Path) -> None:
    """Failing first: the script took the count from $SLURM_ARRAY_TASK_COUNT, which the
    documented re-run (`sbatch --array=3 shards.sbatch`) sets to 1: `--shard 3/1` stopped."""
    script = _script()
    merge = re.search(r"harness merge (results/zeroshot_qwen_omni_vllm\S*)", PAGE)
    assert merge is not None
    calls = _submit(script, command, tmp_path)
    runs = [call for call in calls if call[0] == "run"]
    exports = [call for call in calls if call[:2] == ["cache", "export"]]
    assert runs and len(runs) == len(exports)
    expected = _tasks(re.findall(r"--array=(\S+)", command)[0]) if "--array" in command else None
    for run, export in zip(runs, exports, strict=True):
        shard = Shard.parse(run[run.index("--shard") + 1])
        assert shard.count == 8 and (expected is None or shard.index in expected)
        (config,) = load_experiments(ROOT / run[1])
        folder = run_folder(Path("results"), config, shard)
        assert export[export.index("--run") + 1] == str(folder)
        assert fnmatch.fnmatch(str(folder), merge.group(1))
    assert sorted(Shard.parse(r[r.index("--shard") + 1]).index for r in runs) == (
        expected or list(range(8))
    )
