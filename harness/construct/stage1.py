"""Stage 1: keep the MusicCaps clips that can play under a conversation."""

from __future__ import annotations

import ast
import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.construct.audio_tags import AudioVocalsConfig, find_audio, vocals_by_audio
from harness.construct.files import write_json
from harness.core.errors import DatasetError
from harness.core.files import read_text, sha256_of, write_jsonl


def _terms(text: str) -> list[str]:
    return [term.strip() for term in text.split(",")]


MUSICCAPS_COLUMNS = tuple(
    _terms(
        "ytid, start_s, end_s, audioset_positive_labels, aspect_list, caption, author_id, "
        "is_balanced_subset, is_audioset_eval"
    )
)

DEFAULT_RULES: dict[str, list[str]] = {
    "vocals": _terms(
        "vocal*, voice, voices, singer*, singing, sings, sung, song with lyrics, lyrics, rap, "
        "raps, rapping, rapper*, choir*, chant, chants, chanting, humming, a cappella, acapella, "
        "yodel*, scat singing, beatbox*, falsetto, crooning, choral"
    ),
    "speech": _terms(
        "speech, speaking, speaks, spoken, talk, talks, talking, narration, narrator*, narrating, "
        "narrates, conversation, announcer, commentary, monologue, sermon, preaching, voice-over, "
        "voiceover"
    ),
    "noise": _terms(
        "noise, noises, noisy, static, hiss, hissing, crackle*, crackling, crackly, buzzing, "
        "humming noise, electric hum, white noise"
    ),
    "sound_effects": _terms(
        "sound effect*, soundeffect*, sfx, special effects, sonic effects, applause, crowd*, "
        "audience, cheering, laughter, laughing, footsteps, explosion*, gunshot*, siren*, birds, "
        "bird sound*, birdsong, chirping, barking, engine*, traffic, thunder*, rainfall, rain "
        "sound*, raining, ocean waves, waves crashing, water sound*, flowing water, water "
        "flowing, wind sound*, wind blowing, ambient sounds, nature sounds, room sounds, street "
        "sounds, phone ringing, alarm, beeping, car horn*"
    ),
}

# A cue negates a later mention in the same clause, within NEGATION_WINDOW words, unless a
# scope breaker ("and", "with", "but", ...) stands between them: "no drums or vocals" is
# negated, "no drums and female vocals" is not.
DEFAULT_NEGATION_CUES = _terms(
    "no, not, non, without, none, zero, never, lack, lacks, lacking, absence, devoid, free of"
)
DEFAULT_NEGATION_SUFFIXES = ["free", "less", "absent"]
DEFAULT_SCOPE_BREAKERS = ["and", "with", "but", "plus", "featuring", "feat", "then"]
NEGATION_WINDOW = 5
_CLAUSE_SPLIT = re.compile(
    r"[.;!?:()\[\]]|\bbut\b|\bhowever\b|\balthough\b|\bthough\b|\bwhile\b|\bwhereas\b|\bexcept\b"
)


class Stage1Config(BaseModel):
    """Term lists and negation handling; every list can be replaced in the build config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rules: dict[str, list[str]] = Field(default_factory=lambda: dict(DEFAULT_RULES))
    negation_cues: list[str] = Field(default_factory=lambda: list(DEFAULT_NEGATION_CUES))
    negation_suffixes: list[str] = Field(default_factory=lambda: list(DEFAULT_NEGATION_SUFFIXES))
    scope_breakers: list[str] = Field(default_factory=lambda: list(DEFAULT_SCOPE_BREAKERS))
    negation_window: int = Field(default=NEGATION_WINDOW, ge=0)
    check_caption: bool = Field(
        default=False, description="also apply the rules to the caption, sentence by sentence"
    )
    audio_vocals: AudioVocalsConfig | None = Field(
        default=None,
        description="also remove clips whose audio the musicnn tagger hears a voice in",
    )


def _term_pattern(term: str) -> str:
    term = term.strip().lower()
    stem, wildcard = (term[:-1], True) if term.endswith("*") else (term, False)
    body = r"[\s\-]+".join(re.escape(word) for word in re.split(r"[\s\-]+", stem))
    return body + (r"\w*" if wildcard else "") + r"\b"


def _alternation(words: list[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(_term_pattern(w) for w in words) + ")")


@dataclass(frozen=True)
class Mention:
    rule: str
    phrase: str  # the clause the term was found in (lowercased)
    negated: bool


class SuitabilityFilter:
    """The stage-1 rules, compiled once."""

    def __init__(self, config: Stage1Config) -> None:
        self.config = config
        self._rules = {name: _alternation(terms) for name, terms in config.rules.items() if terms}
        self._cues = _alternation(config.negation_cues)
        self._breakers = _alternation(config.scope_breakers)
        suffixes = "|".join(re.escape(s) for s in config.negation_suffixes)
        self._suffix = re.compile(rf"^[\s\-]*(?:{suffixes})\b") if suffixes else None

    def _negated(self, clause: str, start: int, end: int) -> bool:
        if self._suffix is not None and self._suffix.match(clause[end:]):
            return True
        before = clause[:start]
        cues = list(self._cues.finditer(before))
        if not cues:
            return False
        between = before[cues[-1].end() :]
        if self._breakers.search(between):
            return False
        return len(re.findall(r"\w+", between)) <= self.config.negation_window

    def mentions(self, phrase: str) -> list[Mention]:
        """Every rule term found in `phrase`, each marked negated or not."""
        found = []
        for clause in _CLAUSE_SPLIT.split(phrase.lower()):
            for rule, pattern in self._rules.items():
                for match in pattern.finditer(clause):
                    negated = self._negated(clause, match.start(), match.end())
                    found.append(Mention(rule, clause.strip(), negated))
        return found

    def fired(self, texts: list[str]) -> tuple[dict[str, list[str]], bool]:
        """Rules with a non-negated mention (rule -> phrases), and whether a negated mention
        was seen (a clip kept thanks to negation handling)."""
        fired: dict[str, list[str]] = {}
        any_negated = False
        for text in texts:
            for mention in self.mentions(text):
                if mention.negated:
                    any_negated = True
                elif mention.phrase not in fired.setdefault(mention.rule, []):
                    fired[mention.rule].append(mention.phrase)
        return fired, any_negated


def parse_aspects(raw: str) -> list[str]:
    """MusicCaps stores the aspect list as a Python list literal: "['piano', 'calm']"."""
    value = ast.literal_eval(raw)
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValueError("aspect_list is not a list of strings")
    return [a.strip() for a in value if a.strip()]


def _flag(value: str) -> bool:
    if value not in ("True", "False"):
        raise ValueError(f"expected True or False, got {value!r}")
    return value == "True"


def read_musiccaps(path: Path) -> list[dict[str, Any]]:
    """MusicCaps-format CSV rows as clip records; DatasetError names the bad line."""
    text = read_text(path).removeprefix("\ufeff")
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    with io.StringIO(text, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in MUSICCAPS_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(path, 1, f"missing column(s) {missing}")
        for row in reader:
            line = reader.line_num
            try:
                ytid = row["ytid"].strip()
                if not ytid:
                    raise ValueError("empty ytid")
                if ytid in seen:
                    raise ValueError(f"duplicate ytid {ytid!r}")
                record = {
                    "id": ytid,
                    "caption": " ".join(row["caption"].split()),
                    "aspects": parse_aspects(row["aspect_list"]),
                    "start_s": float(row["start_s"]),
                    "end_s": float(row["end_s"]),
                    "audioset_positive_labels": [
                        label for label in row["audioset_positive_labels"].split(",") if label
                    ],
                    "author_id": row["author_id"],
                    "is_balanced_subset": _flag(row["is_balanced_subset"]),
                    "is_audioset_eval": _flag(row["is_audioset_eval"]),
                }
            except (ValueError, SyntaxError, TypeError, AttributeError) as exc:
                raise DatasetError(path, line, str(exc)) from None
            seen.add(ytid)
            rows.append(record)
    if not rows:
        raise DatasetError(path, None, "no rows")
    return rows


@dataclass
class Stage1Result:
    kept: list[dict[str, Any]]
    removed: list[dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)


def filter_clips(rows: list[dict[str, Any]], config: Stage1Config) -> Stage1Result:
    rules = SuitabilityFilter(config)
    kept, removed = [], []
    by_rule: Counter[str] = Counter()
    first_rule: Counter[str] = Counter()
    phrases: dict[str, Counter[str]] = {name: Counter() for name in config.rules}
    kept_by_negation = 0
    for row in rows:
        texts = list(row["aspects"])
        if config.check_caption:
            texts.append(row["caption"])
        fired, negated = rules.fired(texts)
        if not fired:
            kept.append(row)
            kept_by_negation += negated
            continue
        ordered = [name for name in config.rules if name in fired]
        by_rule.update(ordered)
        first_rule[ordered[0]] += 1
        for name in ordered:
            phrases[name].update(fired[name])
        removed.append({"id": row["id"], "rules": {name: fired[name] for name in ordered}})
    if config.audio_vocals is not None:
        kept, heard = _audio_vocals(kept, config.audio_vocals)
        removed += heard["removed_rows"]
        by_rule["vocals_audio"] = first_rule["vocals_audio"] = len(heard["removed_rows"])
    report = {
        "n_input": len(rows),
        "n_kept": len(kept),
        "n_removed": len(removed),
        "removed_by_rule": {name: by_rule[name] for name in _rule_names(config)},
        "removed_first_rule": {name: first_rule[name] for name in _rule_names(config)},
        "kept_thanks_to_negation": kept_by_negation,
        "top_phrases": {
            name: [[phrase, n] for phrase, n in counter.most_common(15)]
            for name, counter in phrases.items()
        },
        "config": config.model_dump(mode="json"),
    }
    if config.audio_vocals is not None:
        report["audio_vocals"] = {k: v for k, v in heard.items() if k != "removed_rows"}
    return Stage1Result(kept, removed, report)


def _rule_names(config: Stage1Config) -> list[str]:
    return [*config.rules, *(["vocals_audio"] if config.audio_vocals else [])]


def _audio_vocals(
    kept: list[dict[str, Any]], config: AudioVocalsConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The clips the text rules kept, less those whose audio has vocals; what was heard.
    A clip without a readable audio file is kept and counted as not checked."""
    paths: dict[str, Path] = {}
    for row in kept:
        path, _ = find_audio(config.audio_dir, row["id"], config.audio_extensions)
        if path is not None:
            paths[row["id"]] = path
    evidence = vocals_by_audio(paths, config)
    still, removed = [], []
    for row in kept:
        found = evidence.get(row["id"])
        if found is None:
            still.append(row)
            continue
        heard = {"tag": found.vocal_tag, "p": round(found.vocal, 4)}
        row = {**row, "vocals_audio": {**heard, "no_vocals": round(found.voiceless, 4)}}
        if found.has_vocals(config.threshold):
            removed.append({"id": row["id"], "rules": {"vocals_audio": [found.describe()]}})
        else:
            still.append(row)
    summary = {
        "model": config.model,
        "threshold": config.threshold,
        "checked": len(evidence),
        "not_checked_no_audio": len(kept) - len(evidence),
        "removed": [r["id"] for r in removed],
        "removed_rows": removed,
    }
    return still, summary


def run_stage1(csv_path: Path, out_dir: Path, config: Stage1Config | None = None) -> dict[str, Any]:
    """Filter `csv_path` into `out_dir`: kept.jsonl, removed.jsonl, report.json."""
    config = config or Stage1Config()
    result = filter_clips(read_musiccaps(csv_path), config)
    result.report["input_sha256"] = sha256_of(csv_path)
    write_jsonl(out_dir / "kept.jsonl", result.kept)
    write_jsonl(out_dir / "removed.jsonl", result.removed)
    write_json(out_dir / "report.json", result.report)
    return result.report
