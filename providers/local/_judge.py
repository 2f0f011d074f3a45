"""Local audio-language model judges (transformers): loading once per run, prompts through the
family's own processor, micro-batched greedy generation and the expected score."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from harness.core.audio import read_mono
from harness.core.json_text import first_object_end
from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers._expected_score import ContinuationMask, Path, score_strings
from providers.base import Judge
from providers.local._microbatch import MicroBatcher
from providers.local._processor import load_processor, prompt_text
from providers.local._settings import (
    LocalOptions,
    LocalSettings,
    as_provider_error,
    free_memory,
    hf,
    load_model,
    local_identity,
    require_local_stack,
)

log = logging.getLogger(__name__)


@dataclass
class Loaded:
    processor: Any
    model: Any
    continues: ContinuationMask | None  # for the expected score

    @property
    def tokenizer(self) -> Any:
        return getattr(self.processor, "tokenizer", self.processor)


# The parts (processor, model) of the judges that stay loaded (`keep_loaded`): the last one
# asked for, so a sweep's runs share one load and a different checkpoint replaces it.
_KEPT: dict[str, tuple[Any, Any]] = {}


class LocalJudge(Judge):
    """A local audio-language model judge: subclasses name the transformers model and
    processor classes of the family."""

    model_class: ClassVar[str]
    processor_class: ClassVar[str]
    sampling_rate: ClassVar[int] = 16000
    max_clips_per_prompt: ClassVar[int | None] = None
    keep_loaded: ClassVar[bool] = False  # True: kept for the process (see _KEPT)
    Options: ClassVar[type[ProviderConfig]] = LocalOptions
    config: LocalOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        require_local_stack()
        self.settings = LocalSettings.from_options(self.config, self.model)
        self._loaded: Loaded | None = None
        self._load_error: ProviderError | None = None
        self._loading = asyncio.Lock()
        self.batcher: MicroBatcher[ChatRequest, ChatResponse] = MicroBatcher(
            self._run_batch, self.settings.batch_size, self.settings.batch_wait_s
        )

    def identity(self) -> dict[str, Any]:
        return local_identity(super().identity(), self.settings)

    def load_parts(self) -> tuple[Any, Any]:
        processor = load_processor(self.processor_class, self.settings)
        return processor, load_model(self.model_class, self.settings)

    def kept_parts(self) -> tuple[Any, Any]:
        if not self.keep_loaded:
            return self.load_parts()
        settings = self.settings
        key = repr((type(self).__name__, settings.checkpoint, settings.revision, settings.dtype))
        key += repr((settings.device, settings.device_map))
        if key not in _KEPT:
            _KEPT.clear()
            free_memory()
            _KEPT[key] = self.load_parts()
        return _KEPT[key]

    def load(self) -> Loaded:
        if self._loaded is None:
            loaded = Loaded(*self.kept_parts(), continues=None)
            if self.settings.expected_score:
                loaded.continues = ContinuationMask.from_tokenizer(loaded.tokenizer)
            self._loaded = loaded
        return self._loaded

    async def ready(self) -> None:
        """Load the model (once, in a worker thread) before the first call is timed."""
        if self._loaded is not None:
            return
        async with self._loading:
            if self._load_error is not None:
                raise self._load_error
            if self._loaded is None:
                try:
                    await asyncio.to_thread(self.load)
                except Exception as exc:
                    self._load_error = as_provider_error(exc, f"loading {self.model}", "load")
                    raise self._load_error from exc

    async def aclose(self) -> None:
        await self.batcher.aclose()
        if self._loaded is not None:
            self._loaded = None
            if not self.keep_loaded:
                free_memory()

    def prompt(self, loaded: Loaded, request: ChatRequest) -> str:
        return prompt_text(loaded.processor, request)

    def encode(self, loaded: Loaded, requests: Sequence[ChatRequest]) -> dict[str, Any]:
        """The model inputs of a batch of requests (left-padded), from the processor."""
        limit = self.max_clips_per_prompt
        for request in requests:
            if limit is not None and len(request.audio) > limit:
                raise ProviderError(
                    f"{self.config.name} takes at most {limit} clip per prompt; "
                    "use a pointwise prompt variant",
                    transient=False,
                    kind="bad_request",
                )
        texts = [self.prompt(loaded, r) for r in requests]
        clips = [read_mono(clip.path, self.sampling_rate) for r in requests for clip in r.audio]
        # Padding of the text only: each audio part keeps the processor's own padding.
        text_kwargs = {"padding": True, "padding_side": "left"}
        kwargs: dict[str, Any] = {"text": texts, "text_kwargs": text_kwargs, "return_tensors": "pt"}
        if clips:
            kwargs.update(audio=clips, sampling_rate=self.sampling_rate)
        return dict(loaded.processor(**kwargs))

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

    def generation_config(self, loaded: Loaded) -> Any:
        """Greedy by default (sampling only with temperature > 0). Built fresh rather than
        taken from the checkpoint, whose generation_config may sample or penalise repeats;
        only its end-of-sequence ids are kept."""
        source = loaded.model.generation_config
        pad = _pad_id(loaded.tokenizer)
        sample = self.config.temperature > 0
        return hf().GenerationConfig(
            max_new_tokens=self.settings.max_new_tokens,
            do_sample=sample,
            temperature=self.config.temperature if sample else None,
            top_p=None,
            top_k=None,
            eos_token_id=source.eos_token_id or loaded.tokenizer.eos_token_id,
            pad_token_id=pad,
            bos_token_id=source.bos_token_id,
            return_dict_in_generate=True,
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
        prompt_len = inputs["input_ids"].shape[1]
        stop = (
            JsonObjectEnd(loaded.tokenizer, prompt_len) if self.settings.stop_after_json else None
        )
        with torch.inference_mode():
            out = loaded.model.generate(
                **inputs,
                generation_config=self.generation_config(loaded),
                stopping_criteria=hf().StoppingCriteriaList([stop] if stop else []),
            )
        new = out.sequences[:, prompt_len:].cpu()
        pad = loaded.tokenizer.pad_token_id
        eos = (loaded.model.generation_config.eos_token_id, loaded.tokenizer.eos_token_id)
        stops = _as_set(eos[0]) | _as_set(eos[1])
        if stop is not None:  # a row that stopped early is padded to the longest
            stops |= _as_set(pad)
        responses = []
        for row, request in enumerate(requests):
            ids = [int(t) for t in new[row]]
            length = next((i for i, t in enumerate(ids) if t in stops), len(ids))
            answer_ids = ids[:length]
            extra: dict[str, Any] = {}
            if length == len(ids) and length == self.settings.max_new_tokens:
                extra["truncated"] = True  # not "..._tokens": the cache reads that as a count
            if loaded.continues is not None:
                extra.update(self.expected_score(loaded, request, answer_ids))
            text = loaded.tokenizer.decode(answer_ids, skip_special_tokens=True)
            if stop is not None:  # like an API's stop sequence: nothing after the object
                text = text[: first_object_end(text) or len(text)]
            prompt_tokens = int(inputs["attention_mask"][row].sum())
            output_tokens = length + (1 if length < len(ids) and ids[length] != pad else 0)
            responses.append(ChatResponse(text, prompt_tokens, output_tokens, extra))
        return responses

    def expected_score(
        self, loaded: Loaded, request: ChatRequest, answer_ids: list[int]
    ) -> dict[str, Any]:
        """`expected_score` (None where the answer holds no score) and its details."""
        assert loaded.continues is not None

        def scorer(prefix: list[int], paths: list[Path]) -> list[NDArray[np.float64]]:
            return self.path_logprobs(loaded, request, prefix, paths)

        found = score_strings(loaded.tokenizer, loaded.continues, answer_ids, scorer)
        return found or {"expected_score": None}

    def path_logprobs(
        self, loaded: Loaded, request: ChatRequest, prefix: list[int], paths: list[Path]
    ) -> list[NDArray[np.float64]]:
        """For each token path after the prompt and the answer's `prefix`, the next-token
        log-probabilities before each of its tokens and after the last: forward passes over
        prompt + prefix + path, `batch_size` paths at a time, audio features repeated."""
        import torch

        single = self.encode(loaded, [request])
        keep = _accepts_logits_to_keep(loaded.model)
        out: list[NDArray[np.float64]] = []
        step = max(self.settings.batch_size, 1)
        for first in range(0, len(paths), step):
            chunk = paths[first : first + step]
            inputs, start = _extend(single, prefix, chunk, _pad_id(loaded.tokenizer))
            inputs = self.to_device(loaded, inputs)
            width = inputs["input_ids"].shape[1]
            if keep:
                inputs["logits_to_keep"] = width - start
            with torch.inference_mode():
                logits = loaded.model(**inputs).logits
            logits = logits[:, logits.shape[1] - (width - start) :].float()
            logprobs = torch.log_softmax(logits, dim=-1).cpu().numpy().astype(np.float64)
            out += [logprobs[i, : len(path) + 1] for i, path in enumerate(chunk)]
        return out

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return await self.batcher.submit(request)


class JsonObjectEnd:
    """A stopping criterion: a row is done once its answer holds a complete JSON object."""

    def __init__(self, tokenizer: Any, prompt_len: int) -> None:
        self.tokenizer, self.prompt_len = tokenizer, prompt_len

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        answers = self.tokenizer.batch_decode(
            input_ids[:, self.prompt_len :], skip_special_tokens=True
        )
        done = [first_object_end(answer) is not None for answer in answers]
        return torch.tensor(done, device=input_ids.device)


def _extend(
    single: dict[str, Any], prefix: list[int], paths: Sequence[Path], pad: int
) -> tuple[dict[str, Any], int]:
    """A batch of one prompt repeated per path, followed by `prefix` + path (right-padded),
    and the position whose logits predict the first token of each path."""
    import torch

    rows = len(paths)
    width = max(len(p) for p in paths) + len(prefix)
    tail = torch.full((rows, width), pad, dtype=torch.long)
    tail_mask = torch.zeros((rows, width), dtype=torch.long)
    for i, path in enumerate(paths):
        tokens = [*prefix, *path]
        tail[i, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        tail_mask[i, : len(tokens)] = 1
    prompt_ids, prompt_mask = single["input_ids"], single["attention_mask"]
    inputs: dict[str, Any] = {
        name: torch.cat([value] * rows) if isinstance(value, torch.Tensor) else value
        for name, value in single.items()
        if name not in ("input_ids", "attention_mask")
    }
    inputs["input_ids"] = torch.cat([prompt_ids.repeat(rows, 1), tail], dim=1)
    inputs["attention_mask"] = torch.cat([prompt_mask.repeat(rows, 1), tail_mask], dim=1)
    return inputs, prompt_ids.shape[1] + len(prefix) - 1


def _accepts_logits_to_keep(model: Any) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def _pad_id(tokenizer: Any) -> int:
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else tokenizer.eos_token_id)


def _as_set(value: int | list[int] | None) -> set[int]:
    if value is None:
        return set()
    return {value} if isinstance(value, int) else set(value)
