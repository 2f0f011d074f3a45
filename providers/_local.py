"""Local audio-language model judges (transformers): loading once per run, prompt layout,
audio encoding, micro-batched greedy generation and the expected score.

A model is loaded once, on the first request of a run, and freed by `aclose()` at the end.

Prompt layout: every family turns a ChatRequest into token ids the same way: the family's
chat turn markers around the system text and the user turn, the user text tokenized piece
by piece, and each clip replaced by the family's audio placeholder ids repeated as many
times as the audio encoder yields embeddings for that clip (computed from the feature
extractor's output, with the formula of the family's own processor). The ids of the
placeholders come from the model config, so they always agree with the checkpoint.
"""

from __future__ import annotations

import logging
import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from harness.audio import read_mono
from harness.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers._batching import MicroBatcher
from providers._expected_score import DigitTable, expected_score
from providers._local_settings import (
    LOCAL_NON_IDENTITY,
    LocalOptions,
    LocalSettings,
    as_provider_error,
    free_memory,
    hf,
    load_model,
    local_identity,
    require_local_stack,
)
from providers.base import Judge

if TYPE_CHECKING:
    import torch


log = logging.getLogger(__name__)


@dataclass
class Loaded:
    model: Any
    tokenizer: Any
    extractor: Any
    digits: DigitTable | None


@dataclass(frozen=True)
class EncodedAudio:
    """Model inputs for the clips of a batch, and the placeholder ids each clip becomes."""

    features: dict[str, Any]
    placeholders: list[list[int]]


class LocalJudge(Judge):
    """A local audio-language model judge: subclasses name the transformers class and say
    how the family lays out a prompt and encodes audio."""

    model_class: ClassVar[str]
    sampling_rate: ClassVar[int] = 16000
    padding_side: ClassVar[str] = "left"  # decoder-only generation pads on the left
    max_clips_per_prompt: ClassVar[int | None] = None
    Options: ClassVar[type[ProviderConfig]] = LocalOptions
    non_identity = LOCAL_NON_IDENTITY
    config: LocalOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        require_local_stack()
        self.settings = LocalSettings.from_options(self.config, self.model)
        self._loaded: Loaded | None = None
        self.batcher: MicroBatcher[ChatRequest, ChatResponse] = MicroBatcher(
            self._run_batch, self.settings.batch_size, self.settings.batch_wait_s
        )

    def identity(self) -> dict[str, Any]:
        return local_identity(super().identity(), self.settings)

    # -- family specifics
    @abstractmethod
    def turns(self, system: str) -> tuple[str, str]:
        """Text before the user turn's content (system turn and user marker) and after it
        (end of turn and the assistant marker)."""

    @abstractmethod
    def encode_audio(self, loaded: Loaded, clips: list[NDArray[np.float32]]) -> EncodedAudio:
        """Features of all clips of a batch (in order) and each clip's placeholder ids."""

    # -- loading
    def load(self) -> Loaded:
        if self._loaded is None:
            kwargs = self.settings.load_kwargs()
            tokenizer = hf().AutoTokenizer.from_pretrained(self.settings.checkpoint, **kwargs)
            tokenizer.padding_side = self.padding_side
            extractor = hf().AutoFeatureExtractor.from_pretrained(
                self.settings.checkpoint, **kwargs
            )
            model = load_model(self.model_class, self.settings)
            digits = DigitTable.from_tokenizer(tokenizer) if self.settings.expected_score else None
            self._loaded = Loaded(model, tokenizer, extractor, digits)
        return self._loaded

    async def aclose(self) -> None:
        await self.batcher.aclose()
        if self._loaded is not None:
            self._loaded = None
            free_memory()

    # -- encoding
    def prompt_ids(
        self, loaded: Loaded, request: ChatRequest, placeholders: list[list[int]]
    ) -> list[int]:
        tokenizer = loaded.tokenizer
        before, after = self.turns(request.system.strip())
        ids: list[int] = list(tokenizer.encode(before, add_special_tokens=False))
        clips = iter(placeholders)
        for part in request.parts:
            if isinstance(part, str):
                ids += tokenizer.encode(part, add_special_tokens=False)
            else:
                ids += next(clips)
        ids += tokenizer.encode(after, add_special_tokens=False)
        return ids

    def encode(self, loaded: Loaded, requests: Sequence[ChatRequest]) -> dict[str, Any]:
        """The padded model inputs of a batch of requests."""
        import torch

        limit = self.max_clips_per_prompt
        for request in requests:
            if limit is not None and len(request.audio) > limit:
                raise ProviderError(
                    f"{self.config.name} takes at most {limit} clip per prompt; "
                    "use a pointwise prompt variant",
                    transient=False,
                    kind="bad_request",
                )
        clips = [read_mono(clip.path, self.sampling_rate) for r in requests for clip in r.audio]
        audio = self.encode_audio(loaded, clips) if clips else EncodedAudio({}, [])
        sequences, offset = [], 0
        for request in requests:
            count = len(request.audio)
            sequences.append(
                self.prompt_ids(loaded, request, audio.placeholders[offset : offset + count])
            )
            offset += count
        pad_id = loaded.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = loaded.tokenizer.eos_token_id
        width = max(len(s) for s in sequences)
        input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            span = (
                slice(width - len(seq), width)
                if self.padding_side == "left"
                else slice(0, len(seq))
            )
            input_ids[row, span] = torch.tensor(seq, dtype=torch.long)
            attention[row, span] = 1
        return {"input_ids": input_ids, "attention_mask": attention, **audio.features}

    def to_device(self, loaded: Loaded, inputs: dict[str, Any]) -> dict[str, Any]:
        import torch

        device, dtype = loaded.model.device, loaded.model.dtype
        moved: dict[str, Any] = {}
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                value = value.to(device)
                if value.is_floating_point():
                    value = value.to(dtype)
            moved[name] = value
        return moved

    # -- generation
    def generation_config(self, loaded: Loaded) -> Any:
        """Greedy by default (sampling only with temperature > 0). Built fresh rather than
        taken from the checkpoint, whose generation_config may sample or penalise repeats;
        only its end-of-sequence ids are kept."""
        source = loaded.model.generation_config
        pad = loaded.tokenizer.pad_token_id
        sample = self.config.temperature > 0
        return hf().GenerationConfig(
            max_new_tokens=self.settings.max_new_tokens,
            do_sample=sample,
            temperature=self.config.temperature if sample else None,
            top_p=None,
            top_k=None,
            eos_token_id=source.eos_token_id or loaded.tokenizer.eos_token_id,
            pad_token_id=pad if pad is not None else loaded.tokenizer.eos_token_id,
            bos_token_id=source.bos_token_id,
            return_dict_in_generate=True,
            output_logits=self.settings.expected_score,
        )

    def _run_batch(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        try:
            return self.generate_batch(requests)
        except Exception as exc:
            raise as_provider_error(exc, f"{self.config.name} ({self.model})") from exc

    def generate_batch(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Generate the answers of a batch in one call (blocking; runs in a worker thread)."""
        import torch

        loaded = self.load()
        inputs = self.to_device(loaded, self.encode(loaded, requests))
        if self.config.seed is not None:
            torch.manual_seed(self.config.seed)
        with torch.inference_mode():
            out = loaded.model.generate(**inputs, generation_config=self.generation_config(loaded))
        prompt_len = inputs["input_ids"].shape[1]
        new = out.sequences[:, prompt_len:].cpu()
        stops = _as_set(loaded.model.generation_config.eos_token_id) | _as_set(
            loaded.tokenizer.eos_token_id
        )
        pad = loaded.tokenizer.pad_token_id
        logits = [step.float().cpu().numpy() for step in out.logits] if out.logits else []
        responses = []
        for row in range(len(requests)):
            ids = [int(t) for t in new[row]]
            length = next((i for i, t in enumerate(ids) if t in stops), len(ids))
            answer_ids = ids[:length]
            extra: dict[str, Any] = {}
            if length == len(ids) and length == self.settings.max_new_tokens:
                extra["truncated_at_max_tokens"] = True
            if loaded.digits is not None:
                found = expected_score(
                    loaded.tokenizer, loaded.digits, answer_ids, [s[row] for s in logits]
                )
                extra.update(found or {"expected_score": None})
            text = loaded.tokenizer.decode(answer_ids, skip_special_tokens=True)
            prompt_tokens = int(inputs["attention_mask"][row].sum())
            output_tokens = length + (1 if length < len(ids) and ids[length] != pad else 0)
            responses.append(ChatResponse(text, prompt_tokens, output_tokens, extra))
        return responses

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return await self.batcher.submit(request)


def _as_set(value: int | list[int] | None) -> set[int]:
    if value is None:
        return set()
    return {value} if isinstance(value, int) else set(value)


def conv_tokens(frames: int) -> int:
    """Audio embeddings of a Whisper-style encoder (stride-2 conv, then pooling by 2) for
    `frames` mel frames: the formula of the Qwen2.5-Omni and Audio Flamingo processors."""
    after_conv = (frames - 1) // 2 + 1
    return (after_conv - 2) // 2 + 1


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)


def tensor_list(value: torch.Tensor) -> list[int]:
    return [int(v) for v in value.reshape(-1).tolist()]
