"""Microsoft CLAP (`ms-clap`): the `msclap` package's 2022 (Cnn14 audio encoder, BERT text
encoder) and 2023 (HTS-AT, GPT-2) models, loaded as msclap's own `CLAPWrapper.load_clap` does."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import pickle
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from harness.core.errors import HarnessError
from harness.core.yaml_files import load_yaml
from providers.local._settings import LocalOptions, hf, load_model_weights
from providers.scorers._two_tower import EmbeddingScorer, Vectors, download, fit_window

log = logging.getLogger(__name__)
INSTALL = "pip install --no-deps msclap==1.3.4 torchlibrosa==0.1.0"


class MsClapOptions(LocalOptions):
    version: Literal["2022", "2023"] | None = Field(
        default=None, description="msclap model version [default: from the weights' file name]"
    )
    text_model: str | None = Field(
        default=None, description="text model [default: the version's, bert-base-uncased or gpt2]"
    )


def msclap_models() -> types.ModuleType:
    """`msclap.models.clap`, imported without running `msclap/__init__.py` (its wrapper needs
    torchaudio, which the scorer does not: it reads audio itself)."""
    spec = importlib.util.find_spec("msclap")
    if spec is None or not spec.submodule_search_locations:
        raise HarnessError(f"ms-clap needs the msclap package: {INSTALL}")
    if importlib.util.find_spec("torchlibrosa") is None:
        raise HarnessError(f"ms-clap needs torchlibrosa: {INSTALL}")
    if "msclap" not in sys.modules:
        package = types.ModuleType("msclap")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["msclap"] = package
    return importlib.import_module("msclap.models.clap")


def msclap_config(version: str) -> dict[str, Any]:
    spec = importlib.util.find_spec("msclap")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    config: dict[str, Any] = load_yaml(folder / "configs" / f"config_{version}.yml")
    return config


class MsClapScorer(EmbeddingScorer):
    default_model = "microsoft/msclap"
    sampling_rate = 44100
    Options = MsClapOptions
    config: MsClapOptions

    @property
    def version(self) -> str:
        if self.config.version is not None:
            return self.config.version
        return "2022" if "2022" in Path(self.settings.checkpoint).name else "2023"

    def weights(self) -> str:
        checkpoint = self.settings.checkpoint
        if checkpoint.endswith(".pth") and not Path(checkpoint).is_file():
            repo, _, filename = checkpoint.rpartition("/")
            return download(repo, filename, self.settings.revision)
        return download(checkpoint, f"CLAP_weights_{self.version}.pth", self.settings.revision)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "version": self.version}

    def load(self) -> Any:
        if self._loaded is not None:
            return self._loaded
        import torch

        tf = hf()
        args = msclap_config(self.version)
        text_model = self.config.text_model or args["text_model"]
        embed_dim = int(args["transformer_embed_dim"])
        if self.config.text_model is not None:  # another text model: its own width
            embed_dim = int(tf.AutoConfig.from_pretrained(text_model).hidden_size)
        model = msclap_models().CLAP(
            audioenc_name=args["audioenc_name"],
            sample_rate=args["sampling_rate"],
            window_size=args["window_size"],
            hop_size=args["hop_size"],
            mel_bins=args["mel_bins"],
            fmin=args["fmin"],
            fmax=args["fmax"],
            classes_num=args["num_classes"],
            out_emb=args["out_emb"],
            text_model=text_model,
            transformer_embed_dim=embed_dim,
            d_proj=args["d_proj"],
        )
        weights = self.weights()
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)["model"]
        except pickle.UnpicklingError:  # a checkpoint with more than tensors: as msclap loads it
            log.warning("ms-clap: %s holds more than tensors; loading it in full", weights)
            state = torch.load(weights, map_location="cpu", weights_only=False)["model"]
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            log.warning(
                "ms-clap: %d missing and %d unexpected weights", len(missing), len(unexpected)
            )
        self.load_report = {"missing": list(missing), "unexpected": list(unexpected)}
        tokenizer = tf.AutoTokenizer.from_pretrained(text_model)
        if "gpt" in text_model:
            tokenizer.add_special_tokens({"pad_token": "!"})
        device, dtype = load_model_weights(model, self.settings)
        self._loaded = _Loaded(model, tokenizer, args, text_model, device, dtype)
        return self._loaded

    def embed_texts(self, loaded: Any, texts: list[str]) -> tuple[Vectors, list[int]]:
        import torch

        gpt = "gpt" in loaded.text_model
        texts = [t + " <|endoftext|>" if gpt else t for t in texts]
        keys = ["input_ids", "attention_mask"]
        if not gpt and "bert" in loaded.text_model:
            keys.append("token_type_ids")
        counts = [len(loaded.tokenizer(t)["input_ids"]) for t in texts]
        limit = int(loaded.tokenizer.model_max_length)
        width = min(max(int(loaded.args["text_len"]), *counts), limit)
        tokens = loaded.tokenizer(
            texts, max_length=width, padding="max_length", truncation=True, return_tensors="pt"
        )
        batch = {k: tokens[k].to(loaded.device) for k in keys}
        with torch.inference_mode():
            out = loaded.model.caption_encoder(batch)
        return out.float().cpu().numpy(), counts

    def embed_audio(self, loaded: Any, clips: list[NDArray[np.float32]]) -> Vectors:
        import torch

        window = int(loaded.args["duration"] * loaded.args["sampling_rate"])
        audio = torch.from_numpy(np.stack([fit_window(c, window) for c in clips]))
        with torch.inference_mode():
            out = loaded.model.audio_encoder(audio.to(loaded.device, loaded.dtype))[0]
        vectors: Vectors = out.float().cpu().numpy()
        return vectors


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    args: dict[str, Any]
    text_model: str
    device: Any
    dtype: Any
