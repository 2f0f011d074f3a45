"""The fake API's batch endpoints at the wire level: what they send validates against the
SDKs' own typed models (openai's `Batch`, `FileObject` and `ChatCompletion`; google-genai's
`BatchJob` after the SDK's own conversion), and jobs end as the settings say."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from google.genai import types
from google.genai.batches import _BatchJob_from_mldev
from openai.types import Batch, FileObject
from openai.types.chat import ChatCompletion

from harness.fake_api import FakeServer, FakeSettings

CHAT = {"model": "fake-judge", "messages": [{"role": "user", "content": 'Say {"score": 7.5}'}]}
GEMINI_REQUEST = {"contents": [{"role": "user", "parts": [{"text": 'Say {"score": 7.5}'}]}]}


def openai_job(server: FakeServer, n: int) -> dict[str, Any]:
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": CHAT}
        for i in range(n)
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    base = server.openai_base_url
    uploaded = httpx.post(
        f"{base}/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}
    ).json()
    FileObject.model_validate(uploaded)
    created = httpx.post(
        f"{base}/batches",
        json={
            "input_file_id": uploaded["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": {"bgm_judge": "label"},
        },
    ).json()
    Batch.model_validate(created)
    return created


def finished(server: FakeServer, batch_id: str) -> dict[str, Any]:
    for _ in range(100):
        job = httpx.get(f"{server.openai_base_url}/batches/{batch_id}").json()
        if job["status"] not in ("validating", "in_progress", "finalizing"):
            return job
        time.sleep(0.01)
    raise AssertionError("the job did not finish")


def test_openai_batch_objects_and_output_lines_validate_against_the_sdk() -> None:
    with FakeServer(FakeSettings(batch_error_rate=0.5)) as server:
        job = finished(server, openai_job(server, 6)["id"])
        batch = Batch.model_validate(job)
        assert batch.status == "completed" and batch.metadata == {"bgm_judge": "label"}
        assert batch.request_counts is not None and batch.request_counts.total == 6
        output = httpx.get(f"{server.openai_base_url}/files/{batch.output_file_id}/content")
        errors = httpx.get(f"{server.openai_base_url}/files/{batch.error_file_id}/content")
        answered = [json.loads(line) for line in output.text.splitlines()]
        failed = [json.loads(line) for line in errors.text.splitlines()]
        listed = httpx.get(f"{server.openai_base_url}/batches", params={"limit": 1}).json()
    assert len(answered) + len(failed) == 6 and failed and answered
    for line in answered:
        assert line["response"]["status_code"] == 200 and line["error"] is None
        ChatCompletion.model_validate(line["response"]["body"])
    for line in failed:
        assert line["response"]["status_code"] == 500 and "error" in line["response"]["body"]
    assert batch.request_counts.failed == len(failed)
    assert [Batch.model_validate(b).id for b in listed["data"]] == [batch.id]


def test_an_input_file_with_a_repeated_custom_id_fails_the_job() -> None:
    with FakeServer() as server:
        lines = [
            {"custom_id": "same", "method": "POST", "url": "/v1/chat/completions", "body": CHAT}
        ]
        content = "".join(json.dumps(line) + "\n" for line in lines * 2).encode()
        base = server.openai_base_url
        uploaded = httpx.post(
            f"{base}/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}
        ).json()
        body = {"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions"}
        job = httpx.post(f"{base}/batches", json={**body, "completion_window": "24h"}).json()
    batch = Batch.model_validate(job)
    assert batch.status == "failed" and batch.errors is not None
    assert batch.errors.data and batch.errors.data[0].code == "duplicate_custom_id"


def test_an_expired_openai_job_delivers_what_it_answered() -> None:
    with FakeServer(FakeSettings(batch_expire_first=1)) as server:
        batch = Batch.model_validate(finished(server, openai_job(server, 4)["id"]))
        errors = httpx.get(f"{server.openai_base_url}/files/{batch.error_file_id}/content")
    assert batch.status == "expired"
    assert batch.request_counts is not None and batch.request_counts.completed == 2
    codes = [json.loads(line)["error"]["code"] for line in errors.text.splitlines()]
    assert codes == ["batch_expired", "batch_expired"]


def gemini_job(server: FakeServer, settings: FakeSettings | None = None) -> types.BatchJob:
    body = {
        "batch": {
            "displayName": "label",
            "inputConfig": {
                "requests": {
                    "requests": [
                        {"request": GEMINI_REQUEST, "metadata": {"key": f"k{i}"}} for i in range(3)
                    ]
                }
            },
        }
    }
    url = f"{server.url}/v1beta/models/gemini-2.5-flash:batchGenerateContent"
    name = httpx.post(url, json=body).json()["name"]
    for _ in range(100):
        raw = httpx.get(f"{server.url}/v1beta/{name}").json()
        job = types.BatchJob._from_response(response=_BatchJob_from_mldev(raw), kwargs={})
        if job.done:
            return job
        time.sleep(0.01)
    raise AssertionError("the job did not finish")


def test_gemini_batch_jobs_validate_against_the_sdk() -> None:
    with FakeServer() as server:
        job = gemini_job(server)
        listed = httpx.get(f"{server.url}/v1beta/batches").json()
    assert job.state == types.JobState.JOB_STATE_SUCCEEDED and job.display_name == "label"
    assert job.dest is not None and job.dest.inlined_responses is not None
    keys = [r.metadata["key"] for r in job.dest.inlined_responses if r.metadata]
    assert keys == ["k0", "k1", "k2"]
    for entry in job.dest.inlined_responses:
        assert entry.response is not None and entry.response.text
    assert [op["metadata"]["displayName"] for op in listed["operations"]] == ["label"]


def test_an_expired_gemini_job_has_no_output() -> None:
    with FakeServer(FakeSettings(batch_expire_first=1)) as server:
        job = gemini_job(server)
        paid = server.stats()["paid_requests"]
    assert job.state == types.JobState.JOB_STATE_EXPIRED and job.dest is None
    assert paid == 0
