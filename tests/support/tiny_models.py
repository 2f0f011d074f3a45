"""Tiny randomly initialised checkpoints of the local model families, for tests and for
`bench/local_throughput.py` on machines without the real weights.

Each builder writes a directory that `from_pretrained` loads exactly like a real checkpoint:
the model (the real transformers class, built from a config with hidden sizes of 16-64 and
one or two layers), a byte-level tokenizer made with `tokenizers` that carries the family's
chat and audio special tokens (named as the family's processor looks them up), the family's
feature extractor, and the official chat template of the real checkpoint
(`chat_templates/*.json`, each with where it was taken from). Nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.audio import audio_ref
from harness.core.types import AudioRef, ChatRequest


def hf() -> Any:
    """The transformers module, imported on first use (typed loosely: its classes are)."""
    import transformers

    return transformers


BYTE_VOCAB = 256
CHAT_TEMPLATES = Path(__file__).resolve().parent / "chat_templates"
TEMPLATE_FILES = {
    "qwen-omni": "qwen2_5_omni.json",
    "phi4-multimodal": "phi4_multimodal.json",
    "audio-flamingo-3": "audioflamingo3.json",
    "music-flamingo": "musicflamingo.json",
}


def official_chat_template(provider: str) -> dict[str, Any]:
    """The real checkpoint's chat template of a local judge family, with its provenance
    (`checkpoint`, `revision`, `source`: repository, path, commit) and what was not verified."""
    fixture: dict[str, Any] = json.loads((CHAT_TEMPLATES / TEMPLATE_FILES[provider]).read_text())
    return fixture


def _write_chat_template(provider: str, directory: Path) -> None:
    """The processor's chat template, in the file transformers reads it from."""
    directory.mkdir(parents=True, exist_ok=True)
    template = official_chat_template(provider)["chat_template"]
    (directory / "chat_template.jinja").write_text(template, encoding="utf-8")


def byte_tokenizer(
    specials: list[str],
    *,
    eos: str,
    pad: str,
    model_max_length: int = 4096,
    named: dict[str, str] | None = None,
) -> Any:
    """A byte-level BPE without merges (every byte is a token) plus `specials`, whose ids
    follow the 256 byte tokens in the order given; `named` gives some of them the attribute
    names a processor reads (`audio_token`, ...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    tf = hf()

    vocab = {symbol: index for index, symbol in enumerate(sorted(ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token=pad,
        model_max_length=model_max_length,
        extra_special_tokens=dict(named or {}),
    )


def _token_ids(tokenizer: Any, tokens: list[str]) -> dict[str, int]:
    return {token: int(tokenizer.convert_tokens_to_ids(token)) for token in tokens}


def _vocab_size(tokenizer: Any) -> int:
    return (len(tokenizer) + 63) // 64 * 64


def _save(model: Any, parts: list[Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    for part in parts:
        part.save_pretrained(directory)
    return directory


def _seeded() -> None:
    import torch

    torch.manual_seed(0)


def _text_config(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": _vocab_size(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        **extra,
    }


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_qwen_omni(directory: Path) -> Path:
    tf = hf()

    named = {
        "audio_token": "<|AUDIO|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
        "image_token": "<|IMAGE|>",
        "video_token": "<|VIDEO|>",
        "vision_bos_token": "<|vision_bos|>",
        "vision_eos_token": "<|vision_eos|>",
    }
    media = list(named.values())
    tokenizer = byte_tokenizer(
        QWEN_SPECIALS + media, eos="<|im_end|>", pad="<|endoftext|>", named=named
    )
    ids = _token_ids(tokenizer, media)
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    config = tf.Qwen2_5OmniThinkerConfig(
        audio_config={
            "num_mel_bins": 16,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 32,
            "d_model": 16,
            "output_dim": 32,
            "n_window": 50,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [0],
        },
        text_config=_text_config(tokenizer, rope_parameters=rope),
        audio_token_index=ids["<|AUDIO|>"],
        audio_start_token_id=ids["<|audio_bos|>"],
        audio_end_token_id=ids["<|audio_eos|>"],
        image_token_index=ids["<|IMAGE|>"],
        video_token_index=ids["<|VIDEO|>"],
        vision_start_token_id=ids["<|vision_bos|>"],
        vision_end_token_id=ids["<|vision_eos|>"],
    )
    _seeded()
    model = tf.Qwen2_5OmniThinkerForConditionalGeneration(config)
    extractor = tf.WhisperFeatureExtractor(feature_size=16, sampling_rate=16000, chunk_length=30)
    _write_chat_template("qwen-omni", directory)
    return _save(model, [tokenizer, extractor], directory)


PHI4_SPECIALS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]


def tiny_phi4_multimodal(directory: Path) -> Path:
    tf = hf()

    named = {"image_token": "<|image|>", "audio_token": "<|audio|>"}
    media = list(named.values())
    tokenizer = byte_tokenizer(
        PHI4_SPECIALS + media, eos="<|end|>", pad="<|endoftext|>", named=named
    )
    ids = _token_ids(tokenizer, media)
    text = _text_config(tokenizer)
    text.pop("num_key_value_heads")
    config = tf.Phi4MultimodalConfig(
        **text,
        num_key_value_heads=1,
        bos_token_id=tokenizer.pad_token_id,
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 28,
            "patch_size": 14,
            "crop_size": 28,
            "image_token_id": ids["<|image|>"],
        },
        audio_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_blocks": 1,
            "num_attention_heads": 2,
            "ext_pw_out_channel": 16,
            "depthwise_separable_out_channel": 16,
            "nemo_conv_channels": 16,
            "input_size": 80,
            "time_reduction": 8,
            "audio_token_id": ids["<|audio|>"],
        },
    )
    _seeded()
    model = tf.Phi4MultimodalForCausalLM(config)
    extractor = tf.Phi4MultimodalFeatureExtractor()
    _write_chat_template("phi4-multimodal", directory)
    return _save(model, [tokenizer, extractor], directory)


def _flamingo_audio_config() -> dict[str, Any]:
    return {
        "num_mel_bins": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "hidden_size": 16,
        # Whisper-style encoders add a fixed positional table: 2 s windows -> 200 frames -> 100.
        "max_source_positions": 100,
    }


def tiny_audio_flamingo3(directory: Path) -> Path:
    tf = hf()

    tokenizer = byte_tokenizer([*QWEN_SPECIALS, "<sound>"], eos="<|im_end|>", pad="<|endoftext|>")
    config = tf.AudioFlamingo3Config(
        audio_config=_flamingo_audio_config(),
        text_config={**_text_config(tokenizer), "model_type": "qwen2"},
        audio_token_id=_token_ids(tokenizer, ["<sound>"])["<sound>"],
    )
    _seeded()
    model = tf.AudioFlamingo3ForConditionalGeneration(config)
    extractor = tf.WhisperFeatureExtractor(feature_size=16, sampling_rate=16000, chunk_length=2)
    template = official_chat_template("audio-flamingo-3")["chat_template"]
    processor = tf.AudioFlamingo3Processor(extractor, tokenizer, chat_template=template)
    return _save(model, [processor], directory)


def tiny_music_flamingo(directory: Path) -> Path:
    tf = hf()

    media = ["<sound>", "<|sound_bos|>", "<|sound_eos|>"]
    tokenizer = byte_tokenizer(QWEN_SPECIALS + media, eos="<|im_end|>", pad="<|endoftext|>")
    ids = _token_ids(tokenizer, media)
    config = tf.MusicFlamingoConfig(
        audio_config={**_flamingo_audio_config(), "model_type": "audioflamingo3_encoder"},
        text_config={**_text_config(tokenizer), "model_type": "qwen2"},
        audio_token_id=ids["<sound>"],
        audio_bos_token_id=ids["<|sound_bos|>"],
        audio_eos_token_id=ids["<|sound_eos|>"],
    )
    _seeded()
    model = tf.MusicFlamingoForConditionalGeneration(config)
    extractor = tf.WhisperFeatureExtractor(feature_size=16, sampling_rate=16000, chunk_length=2)
    template = official_chat_template("music-flamingo")["chat_template"]
    processor = tf.MusicFlamingoProcessor(extractor, tokenizer, chat_template=template)
    return _save(model, [processor], directory)


def tiny_clap(directory: Path) -> Path:
    tf = hf()

    tokenizer = clap_tokenizer()
    config = tf.ClapConfig(
        text_config={
            "vocab_size": _vocab_size(tokenizer),
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 66,
            "projection_dim": 16,
        },
        audio_config={
            "num_mel_bins": 64,
            "spec_size": 64,
            "patch_embeds_hidden_size": 8,
            "depths": [1, 1],
            "num_attention_heads": [1, 2],
            "window_size": 4,
            "hidden_size": 16,
            "projection_dim": 16,
        },
        projection_dim=16,
    )
    _seeded()
    model = tf.ClapModel(config)
    # 1 s windows at a 960-sample hop: 51 frames, within the 64-frame tiny spectrogram.
    extractor = tf.ClapFeatureExtractor(
        feature_size=64, max_length_s=1, hop_length=960, truncation="rand_trunc"
    )
    return _save(model, [tf.ClapProcessor(extractor, tokenizer)], directory)


def clap_tokenizer() -> Any:
    """A RoBERTa tokenizer (the class ClapProcessor requires) over the byte alphabet."""
    from tokenizers.pre_tokenizers import ByteLevel

    tf = hf()

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = {token: index for index, token in enumerate(specials)}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    return tf.RobertaTokenizer(vocab=vocab, merges=[], model_max_length=64)


def tiny_gpt2(directory: Path) -> Path:
    """A GPT-2 of one small layer over the byte alphabet ('!' is id 0, as in GPT-2), with
    `<|endoftext|>` (keep "gpt" in the folder name: msclap picks the text path by name)."""
    tf = hf()

    tokenizer = byte_tokenizer(["<|endoftext|>"], eos="<|endoftext|>", pad="<|endoftext|>")
    config = tf.GPT2Config(
        vocab_size=_vocab_size(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=256
    )
    _seeded()
    return _save(tf.GPT2Model(config), [tokenizer], directory)


def tiny_bert(directory: Path) -> Path:
    """A BERT of one small layer with a character-level WordPiece vocabulary."""
    tf = hf()

    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    tokenizer = tf.BertTokenizerFast(
        vocab={token: index for index, token in enumerate(vocab)}, model_max_length=128
    )
    config = tf.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    _seeded()
    return _save(tf.BertModel(config), [tokenizer], directory)


def tiny_wav2vec2(directory: Path) -> Path:
    """A wav2vec 2.0 with two small convolutions and one transformer layer."""
    tf = hf()

    config = tf.Wav2Vec2Config(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_kernel=(10, 3),
        conv_stride=(5, 2),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        do_stable_layer_norm=True,
        feat_extract_norm="layer",
    )
    _seeded()
    return _save(tf.Wav2Vec2Model(config), [], directory)


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "qwen-omni": tiny_qwen_omni,
    "phi4-multimodal": tiny_phi4_multimodal,
    "audio-flamingo-3": tiny_audio_flamingo3,
    "music-flamingo": tiny_music_flamingo,
    "clap": tiny_clap,
}


def write_tone(path: Path, seconds: float, freq: float, sample_rate: int = 16000) -> AudioRef:
    """A sine clip written as WAV, as the AudioRef a prompt would carry."""
    import numpy as np
    import soundfile

    t = np.arange(int(sample_rate * seconds)) / sample_rate
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * freq * t), sample_rate)
    return audio_ref(path.stem, path)


def judge_request(system: str, text: str, clips: list[AudioRef]) -> ChatRequest:
    """A pointwise-style request: the text, then each clip after a label."""
    parts: list[str | AudioRef] = [text]
    for index, clip in enumerate(clips):
        parts += [f"\nClip {index + 1}: ", clip]
    parts.append('\nAnswer as {"score": x}.')
    return ChatRequest(system, tuple(parts))
