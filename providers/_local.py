"""What the local (transformers) providers share: settings, loading, micro-batching,
generation and the expected score from token probabilities.

torch and transformers are imported only when a model is loaded, so importing this module
(or the registry) costs nothing to a user of the API providers. A model is loaded once, on
the first request of a run, and freed by `aclose()` at the end of it.

Batching: the runner calls `generate` concurrently (up to `max_concurrency` calls in
flight). `MicroBatcher` collects the waiting requests, up to `batch_size`, and answers
them with one padded forward pass in a worker thread, so a GPU stays busy while the event
loop keeps feeding it. Set `max_concurrency` to at least `batch_size` (twice is better, so
the next batch is queued while one runs).

Prompt layout: every family turns a ChatRequest into token ids the same way: the family's
chat turn markers around the system text and the user turn, the user text tokenized piece
by piece, and each clip replaced by the family's audio placeholder ids repeated as many
times as the audio encoder yields embeddings for that clip (computed from the feature
extractor's output, with the formula of the family's own processor). The ids of the
placeholders come from the model config, so they always agree with the checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from harness.audio import read_mono
from harness.errors import HarnessError
from harness.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers.base import Judge

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")

# Provider keys that change how a run uses the hardware but never what the model answers.
LOCAL_NON_IDENTITY = frozenset({"batch_size", "batch_wait_s", "device", "device_map"})
DEFAULT_MAX_NEW_TOKENS = 64


class MissingLocalStack(HarnessError):
    pass


def require_local_stack() -> None:
    """Fail at construction, with the install hint, when torch or transformers is missing."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingLocalStack(
            f"local models need {' and '.join(missing)}: pip install 'bgm-judge[local]'"
        )


# ------------------------------------------------------------------------------- settings
class LocalOptions(ProviderConfig):
    """The `provider:` keys every local provider takes (see README)."""

    dtype: str = Field(default="auto", description="auto = bfloat16 on a GPU, float32 on CPU")
    device: str = Field(default="auto", description="auto = cuda when available, else cpu")
    device_map: str | dict[str, Any] | None = Field(
        default=None, description="accelerate device map; auto on a GPU"
    )
    batch_size: int = Field(default=8, ge=1)
    batch_wait_s: float = Field(default=0.005, ge=0.0)
    expected_score: bool = Field(
        default=False, description="probability-weighted score next to the greedy one"
    )
    revision: str | None = Field(default=None, description="checkpoint revision (hub)")


@dataclass(frozen=True)
class LocalSettings:
    """The `provider:` keys every local provider understands (see README)."""

    checkpoint: str
    dtype: str = "auto"  # auto = bfloat16 on a GPU, float32 on CPU
    device: str = "auto"  # auto = cuda when available, else cpu
    device_map: str | dict[str, Any] | None = None  # accelerate map; auto on GPU by default
    batch_size: int = 8
    batch_wait_s: float = 0.005
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    expected_score: bool = False
    revision: str | None = None

    @classmethod
    def from_options(cls, options: LocalOptions, checkpoint: str) -> LocalSettings:
        return cls(
            checkpoint=checkpoint,
            dtype=options.dtype,
            device=options.device,
            device_map=options.device_map,
            batch_size=options.batch_size,
            batch_wait_s=options.batch_wait_s,
            max_new_tokens=options.max_tokens or DEFAULT_MAX_NEW_TOKENS,
            expected_score=options.expected_score,
            revision=options.revision,
        )

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.resolved_device().startswith("cuda") else "float32"

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of every `from_pretrained` call of one checkpoint."""
        kwargs: dict[str, Any] = {}
        if self.revision:
            kwargs["revision"] = self.revision
        if Path(self.checkpoint).is_dir():
            kwargs["local_files_only"] = True
        return kwargs

    def model_kwargs(self) -> dict[str, Any]:
        import torch

        kwargs = {**self.load_kwargs(), "dtype": getattr(torch, self.resolved_dtype())}
        device_map = self.device_map
        if device_map is None and self.resolved_device().startswith("cuda"):
            device_map = "auto"
        if device_map is not None:
            kwargs["device_map"] = device_map
        return kwargs


def local_identity(base: dict[str, Any], settings: LocalSettings) -> dict[str, Any]:
    identity = {k: v for k, v in base.items() if k not in LOCAL_NON_IDENTITY}
    identity.update(
        dtype=settings.resolved_dtype(),
        max_new_tokens=settings.max_new_tokens,
        expected_score=settings.expected_score,
    )
    return identity


def hf() -> Any:
    """The transformers module, imported on first use (typed loosely: its classes are)."""
    import transformers

    return transformers


def load_model(model_class: str, settings: LocalSettings) -> Any:
    """`transformers.<model_class>.from_pretrained` on the settings' device and dtype."""
    cls = getattr(hf(), model_class)
    model = cls.from_pretrained(settings.checkpoint, **settings.model_kwargs())
    if "device_map" not in settings.model_kwargs():
        model = model.to(settings.resolved_device())
    model.eval()
    return model


def free_memory() -> None:
    import gc

    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def as_provider_error(exc: Exception, what: str) -> ProviderError:
    """Map a failure inside a local forward pass to a ProviderError the runner understands."""
    import torch

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, torch.OutOfMemoryError):
        return ProviderError(
            f"{what}: out of GPU memory; lower batch_size or use a smaller dtype",
            transient=False,
            kind="out_of_memory",
        )
    return ProviderError(
        f"{what}: {type(exc).__name__}: {exc}", transient=False, kind="local_model"
    )


# ------------------------------------------------------------------------------- batching
class MicroBatcher(Generic[Item, Result]):
    """Answers concurrent `submit` calls in batches of up to `batch_size` with one call of
    `run_batch` (in a worker thread, one batch at a time). A batch starts as soon as it is
    full or `wait_s` after its first request arrived; requests that come while a batch
    runs form the next one."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Sequence[Result]],
        batch_size: int,
        wait_s: float = 0.005,
    ) -> None:
        self._run_batch = run_batch
        self.batch_size = batch_size
        self.wait_s = wait_s
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # sizes of the batches run so far (for tests/bench)

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            deadline = loop.time() + self.wait_s
            while len(self._pending) < self.batch_size and loop.time() < deadline:
                await asyncio.sleep(0.001)
            taken = self._pending[: self.batch_size]
            del self._pending[: self.batch_size]
            live = [(item, future) for item, future in taken if not future.done()]
            if not live:
                continue
            self.batch_sizes.append(len(live))
            try:
                results = await asyncio.to_thread(self._run_batch, [item for item, _ in live])
            except Exception as exc:
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(live, results, strict=True):
                if not future.done():
                    future.set_result(result)

    async def aclose(self) -> None:
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._worker = None


# ------------------------------------------------------------------------------- expected score
_SCORE_START = re.compile(r'"score"\s*:\s*(?=-?\d)')
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class DigitTable:
    """Vocabulary tokens that spell a whole number 0..10 (surrounding spaces allowed)."""

    ids: NDArray[np.int64]
    values: NDArray[np.int64]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> DigitTable:
        ids, values = [], []
        for token, token_id in tokenizer.get_vocab().items():
            if not any(ch.isdigit() for ch in token):
                continue
            text = tokenizer.convert_tokens_to_string([token]).strip()
            if _DIGITS.fullmatch(text) and int(text) <= 10:
                ids.append(token_id)
                values.append(int(text))
        return cls(np.array(ids, dtype=np.int64), np.array(values, dtype=np.int64))

    @property
    def has_ten(self) -> bool:
        return bool((self.values == 10).any())


def expected_score(
    tokenizer: Any,
    table: DigitTable,
    new_ids: Sequence[int],
    step_logits: Sequence[NDArray[np.float32]],
) -> dict[str, Any] | None:
    """The probability-weighted score of one greedy answer, or None where the answer holds
    no `"score": <number>`.

    At the step where the score's number starts, the probabilities of the tokens that spell
    0..10 (renormalised over those tokens) give E[v] for the leading whole number v; the
    expected score is the greedy score moved by E[v] - v_greedy, so a greedy "7.5" with
    E[v] = 6.8 gives 7.3. Where the tokenizer spells 10 as "1" + "0" and the greedy answer
    is 10, P(10) is split off P("1") with the next step's P("0"). `digit_mass` is the share
    of the step's probability on number tokens (near 1 when the model answers as asked).
    """
    text = tokenizer.decode(list(new_ids), skip_special_tokens=True)
    match = _SCORE_START.search(text)
    if match is None:
        return None
    number = re.match(r"-?\d+(?:\.\d+)?", text[match.end() :])
    if number is None:
        return None
    start = match.end()
    step = None
    for i in range(len(new_ids)):
        if len(tokenizer.decode(list(new_ids[: i + 1]), skip_special_tokens=True)) > start:
            step = i
            break
    if step is None or step >= len(step_logits):
        return None
    logits = np.asarray(step_logits[step], dtype=np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    mass = probs[table.ids]
    total = float(mass.sum())
    if total <= 0.0:
        return None
    by_value = np.bincount(table.values, weights=mass, minlength=11)[:11] / total
    greedy = float(number.group())
    leading = int(number.group().lstrip("-").split(".")[0])
    if not table.has_ten and leading == 10 and step + 1 < len(step_logits):
        zero_ids = table.ids[table.values == 0]
        nxt = np.asarray(step_logits[step + 1], dtype=np.float64)
        p_next = np.exp(nxt - nxt.max())
        p_zero = float(p_next[zero_ids].sum() / p_next.sum())
        by_value[10], by_value[1] = by_value[1] * p_zero, by_value[1] * (1 - p_zero)
    mean_leading = float((np.arange(11) * by_value).sum())
    value = min(10.0, max(0.0, greedy + mean_leading - leading))
    return {
        "expected_score": round(value, 4),
        "digit_mass": round(total, 4),
        "digit_probs": [round(float(p), 4) for p in by_value],
    }


# ------------------------------------------------------------------------------- judges
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
