"""Listen's part in evaluations: recordings transcribed by each variant's target, measured — the corpus word error
rate against the references, with its bootstrap interval — not rated. A SPEC names `[[items]]` (audio, reference)
or an `items_file` instead of prompts; the recordings are kept with the evaluation."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, ClassVar, Literal

from protocol import limits
from protocol.errors import InvalidInput
from services.eval import rated, stats
from services.eval.family import Chart, EvalFamily, Variant, wer_figures, wer_text
from services.eval.prompts import resolve
from services.files import read_user_file

# An evaluation's SPEC (services.eval.spec.EvalSpec) and its items (services.eval.store.Item): named, not imported
# — the registry imports this part, and those modules import the registry.
EvalSpec = Any
Item = Any

LISTEN_COLUMNS = ("label", "items", "failed", "wer", "wer_ci95_low", "wer_ci95_high", "utterances", "ref_words",
                  "word_errors", "latency_p50_s", "latency_p95_s", "latency_n", "cost_per_item_usd")


class ListenVariant(Variant):
    EXAMPLE: ClassVar[str] = 'route = "file"'
    model: str | None = None
    language: str | None = None
    route: Literal["file", "stream"] = "file"  # stream: sent as a microphone would, paced at real time


def _items_file(path: Path) -> list[dict[str, Any]]:
    """An items_file: CSV rows of audio, reference (a header row `audio,reference` is skipped)."""
    data = read_user_file(path, what="items_file", limit=limits.PROMPTS_FILE_MAX_BYTES, hint="; give a UTF-8 .csv file")
    try:
        rows = [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"))) if any(c.strip() for c in r)]
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read items_file {path} ({exc}); give a UTF-8 .csv file") from None
    if rows and [c.strip().lower() for c in rows[0][:2]] == ["audio", "reference"]:
        rows = rows[1:]
    out = []
    for n, row in enumerate(rows, 1):
        if len(row) < 2:
            raise InvalidInput(f"items_file {path}, row {n}: give two columns, audio and reference")
        out.append({"audio": str(path.parent / row[0].strip()), "reference": row[1]})
    return out


class ListenEval(EvalFamily):
    name = "listen"
    variant = ListenVariant
    takes = "audio"
    makes = "text/plain"
    rated = False
    unrated_note = ("Blind rating is not needed here: a word error rate is objective — each variant's transcripts "
                    "are compared with the references, and the results below say how it went.")
    chart = Chart("wer", "wer_ci95_low", "wer_ci95_high", "word error rate (95 % bootstrap interval)", percent=True)

    def inputs(self, data: dict[str, Any], base_dir: Path | None, *,
               required: bool = True) -> tuple[list[str], list[str]]:
        """The items' references (as the prompts) and recordings (paths), each recording read and checked."""
        from services.eval.listening import check_reference
        from services.listen import load_audio

        if "prompts" in data or "prompts_file" in data:
            raise InvalidInput("a listen evaluation names recordings, not prompts: give [[items]] tables of audio and "
                               "reference, or items_file")
        if "items" in data and "items_file" in data:
            raise InvalidInput("give items or items_file, not both")
        raw = _items_file(resolve(data["items_file"], base_dir)) if "items_file" in data else data.get("items", [])
        if not isinstance(raw, list) or not raw:
            raise InvalidInput("the listen evaluation has no items: give [[items]] tables of audio (a recording's "
                               "path) and reference (the text spoken), or items_file")
        paths, references = [], []
        for i, item in enumerate(raw, 1):
            if not isinstance(item, dict) or set(item) != {"audio", "reference"}:
                raise InvalidInput(f"item {i}: give exactly audio (a recording's path) and reference (the text spoken)")
            path, reference = resolve(item["audio"], base_dir), str(item["reference"]).strip()
            check_reference(f"item {i} ({path.name})", reference)
            try:
                load_audio(read_user_file(path, what=f"item {i}'s audio", limit=limits.TRANSCRIPTION_FILE_MAX_BYTES,
                                          hint="; give a recording file"), path.name)
            except InvalidInput as exc:
                raise InvalidInput(f"item {i}: {exc}") from None
            paths.append(str(path.resolve()))
            references.append(reference)
        return references, paths

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        from protocol.listen import is_english
        if not is_english(settings.get("language")):
            raise InvalidInput(f"language {settings.get('language')!r}: word error rates are measured on English "
                               "only; leave language out or give en")
        return {k: settings.get(k) for k in ("model", "language", "route")}

    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], *, recording: bytes | None = None,
                 name: str = "the recording") -> tuple[bytes, dict[str, Any]]:
        """The transcript of `recording` (the .txt output) and its errors, words and wer against `prompt`, the
        reference."""
        from services.eval.listening import transcribe
        self.request(prompt, settings)
        return transcribe(backend.client(self.name), recording or b"", name, prompt, settings)

    # -- the report: measured, not rated ---------------------------------------------------------------------------
    def measured(self, spec: EvalSpec, ok: list[Item]) -> dict[str, Any]:
        w = wer_figures("", [(i.figures["errors"], i.figures["words"]) for i in ok if "words" in i.figures])
        return {"wer": w["wer"], "wer_ci95": w["ci95"], "utterances": w["n"], "ref_words": w["words"],
                "word_errors": w["errors"]}

    def columns(self, res: dict[str, Any]) -> tuple[str, ...]:
        return LISTEN_COLUMNS

    def separate(self, a: str, b: str, ta: dict[str, Any], tb: dict[str, Any], rows: dict[str, dict[str, Any]]
                 ) -> dict[str, Any]:
        """WER is measured, not rated: its bootstrap intervals decide."""
        overlap = stats.intervals_overlap(rows[a]["wer_ci95"], rows[b]["wer_ci95"])
        return {"a": a, "b": b, "overlap": overlap, "more_ratings": None, "n_each": None}

    def verdicts(self, res: dict[str, Any]) -> list[str]:
        return [f"{s['a']} vs {s['b']}: the WER 95 % intervals " + (
            "overlap — no significant difference at these utterances." if s["overlap"] else
            "do not overlap — a significant difference.") for s in res["separation"]]

    def measured_lines(self, res: dict[str, Any]) -> list[str]:
        lines = [f"{v['label']}: WER {wer_text(v['wer'], v['wer_ci95'], v['utterances'], v['ref_words'])}"
                 for v in res["variants"]]
        return [*lines, f"Method: {res['method']['wer']}."]

    def markdown(self, res: dict[str, Any]) -> str:
        return "\n".join([f"# {res['name']} ({res['modality']}, {res['id']})", "",
                          f"{res['succeeded']} of {res['items']} items transcribed, {res['failed']} failed.", "",
                          *[f"- {line}" for line in self.measured_lines(res)],
                          *[f"- {s}" for s in self.verdicts(res)]]) + "\n"

    def method_text(self, res: dict[str, Any]) -> str:
        return "Word error rates are objective: no blind rating. " + res["method"]["wer"] + "."

    def summary(self, v: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
        return {"WER (corpus)": v["wer"], "95 % interval": rated.interval(v["wer_ci95"], "{:.1%}"),
                "utterances": v["utterances"], "reference words": v["ref_words"], "word errors": v["word_errors"]}


EVALUATION = ListenEval()
