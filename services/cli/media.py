"""`python -m services image|video` — generate from the shell; the result is written and kept in the history.

    python -m services image --prompt "a lighthouse at dawn" [--size 1024x1024] [--steps 4] [--seed 42]
                             [--out image.png] [--json]
    python -m services image --edit a.png [--edit b.jpg …] --prompt "make them friends" [--size WxH] [--json]
    python -m services video --prompt "the camera pans slowly" [--image a.png] [--frames 17] [--steps 30]
                             [--out video.mp4] [--json]

`image --edit FILE` (1 to 4 times) edits those reference images with the prompt (FLUX.2-klein's
/v1/images/edits); without --size the result has the first reference's proportions at about 1 MP. On SageMaker
the references are fitted under the 6 MB request limit and the output says how.

Both take the common backend options (--backend offline|server|sagemaker, --url URL, --state-file F). Exit code 0 on
success; 1 with a message naming what to fix otherwise (2 for a prompt that is not UTF-8). An --out that cannot
be written is refused before anything starts; if writing still fails afterwards (a full disk), the result goes
to a fallback file whose name is printed. A video is written to --out before the history keeps its copy: a
full data disk loses only that copy (the job is recorded failed, naming the disk, and the exit code is 1).
`--json` prints one JSON object with the exact parameters (the seed used included) and the timings. Each run is also recorded in the studio's history
(the data_dir setting) unless --no-history is given, so the pages show it too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput, JobFailed
from protocol.limits import MAX_UPLOAD_BYTES
from services.cli.common import Saved, check_out, read_text, save_output
from services.files import read_user_file
from services.images import DEFAULT_SIZE, EditReference, ImageEditRequest, ImageRequest
from services.images import DEFAULT_STEPS as IMAGE_STEPS
from services.videos import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_GUIDANCE,
    DEFAULT_HEIGHT,
    DEFAULT_STEPS,
    DEFAULT_WIDTH,
    JOB_TIMEOUT_S,
    SMOKE_TEST_STEPS,
    VIDEO_FILE,
    VideoRequest,
)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = sub.add_parser("image", parents=[common], help="generate or edit an image and write it", formatter_class=fmt,
                       description="Generate an image, or edit 1–4 reference images with --edit (FLUX.2-klein on "
                                   "the real endpoints; a labelled preview offline).")
    p.add_argument("--prompt", required=True, help='what to draw, or the edit to make ("-" reads it from stdin)')
    p.add_argument("--edit", type=Path, action="append", metavar="FILE",
                   help="a reference image to edit (PNG/JPEG/WebP/BMP/GIF); give it 1 to 4 times")
    p.add_argument("--negative-prompt", help="what to avoid")
    p.add_argument("--size", help=f"WIDTHxHEIGHT, each 64–2048 (default: {DEFAULT_SIZE}; with --edit: the first "
                                  "reference's proportions at about 1 MP)")
    p.add_argument("--steps", type=int, default=IMAGE_STEPS, help="inference steps (FLUX.2-klein wants about 4)")
    p.add_argument("--guidance", type=float, help="guidance scale 0–20 (default: the server's)")
    p.add_argument("--seed", type=int, help="default: a random seed (printed with --json)")
    p.add_argument("--n", type=int, default=1, help="images per request (1–10)")
    p.add_argument("--format", choices=["png", "jpeg", "webp"], default="png", help="output format")
    p.add_argument("--out", type=Path, default=Path("image.png"), help="file to write (with --n > 1: name-1.png, …)")
    p.add_argument("--no-history", action="store_true", help="do not record the run in the studio's history")
    p.set_defaults(func=run_image)

    v = sub.add_parser("video", parents=[common], help="generate a video (a job) and write the MP4", formatter_class=fmt,
                       description="Generate a short video (Wan2.1-VACE on the real endpoints; a preview offline), "
                                   "optionally conditioned on an image.")
    v.add_argument("--prompt", required=True, help='how the scene moves ("-" reads it from stdin)')
    v.add_argument("--image", type=Path, help="reference image (PNG/JPEG/WebP); fitted to the video size")
    v.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    v.add_argument("--height", type=int, default=DEFAULT_HEIGHT)
    v.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="frames (Wan rounds to 4k+1)")
    v.add_argument("--fps", type=int, default=DEFAULT_FPS)
    v.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"inference steps ({SMOKE_TEST_STEPS} is a smoke test only: it loses the composition)")
    v.add_argument("--guidance", type=float, default=DEFAULT_GUIDANCE)
    v.add_argument("--seed", type=int, help="default: a random seed (printed with --json)")
    v.add_argument("--negative-prompt", help="what to avoid")
    v.add_argument("--timeout", type=float, default=JOB_TIMEOUT_S, help="seconds to wait for the job")
    v.add_argument("--out", type=Path, default=Path("video.mp4"), help="MP4 file to write")
    v.add_argument("--no-history", action="store_true", help="do not record the run in the studio's history")
    v.set_defaults(func=run_video)


def _prompt(value: str) -> str:
    return read_text(value, "--prompt")


def _report(saved: list[Saved]) -> int:
    """Say on stderr which results did not go where --out asked (and where they are instead); the exit code."""
    problems = [s.problem for s in saved if s.problem]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _json_outcome(saved: list[Saved]) -> dict[str, Any]:
    problems = [s.problem for s in saved if s.problem]
    return {"ok": not problems, "error": "; ".join(problems) or None}


def _outputs(out: Path, count: int) -> list[Path]:
    if count == 1:
        return [out]
    return [out.with_name(f"{out.stem}-{i + 1}{out.suffix}") for i in range(count)]


def run_image(args: argparse.Namespace) -> int:
    from services.backend import create_backend
    from services.cli.common import settings_from_args

    fields = dict(prompt=_prompt(args.prompt), negative_prompt=args.negative_prompt, steps=args.steps,
                  guidance=args.guidance, seed=args.seed, n=args.n, output_format=args.format)
    request: ImageRequest | ImageEditRequest
    if args.edit:  # bad input fails before any backend starts: unreadable files, 0 or > 4, not images, bombs
        refs = tuple(_edit_reference(path) for path in args.edit)
        request = ImageEditRequest(references=refs, size=args.size, **fields).validated()
    else:
        request = ImageRequest(size=args.size or DEFAULT_SIZE, **fields).validated()
    check_out(*_outputs(args.out, request.n))
    settings = settings_from_args(args)
    backend = create_backend(settings)
    fitting = None
    try:
        if args.no_history:
            result = (backend.client("image").edit(request) if isinstance(request, ImageEditRequest)
                      else backend.client("image").generate(request))
            images, params, timings = result.images, result.request.params(), result.timings()
            preview, job_id, fitting = result.preview, None, result.fitting
            if result.references:
                params["references"] = result.references
        else:
            from services.history import History
            from services.images import record_edit, record_image

            history = History.of(settings)
            job = (record_edit(backend.client("image"), history, request) if isinstance(request, ImageEditRequest)
                   else record_image(backend.client("image"), history, request))
            images = [job.read(name) for name in job.outputs]
            params, timings, preview, job_id = job.params, job.timings, bool(job.meta.get("preview")), job.id
            fitting = job.meta.get("fitting")
    finally:
        backend.close()
    saved = [save_output(path, data, suffix=f".{args.format}")
             for path, data in zip(_outputs(args.out, len(images)), images)]
    written = [s.path for s in saved if s.path]
    if args.json:
        extra = {"edit": True, "fitting": fitting} if isinstance(request, ImageEditRequest) else {}
        print(json.dumps({**_json_outcome(saved), "params": params, "timings": timings, "preview": preview,
                          "out": written, "job_id": job_id, "backend": backend.name, "target": backend.client("image").target,
                          **extra}))
    elif written:
        model = f", model {timings['model_s']:.2f} s" if "model_s" in timings else ""
        label = " (offline preview)" if preview else ""
        what = f"edit of {len(params['references'])} reference(s), " if isinstance(request, ImageEditRequest) else ""
        print(f"wrote {', '.join(written)}{label}: {what}{params['size']}, {params['steps']} steps, seed {params['seed']}, "
              f"total {timings['total_s']:.2f} s{model}")
        if fitting:
            print(f"note: {fitting}", file=sys.stderr)
    return _report(saved)


def _edit_reference(path: Path) -> EditReference:
    return EditReference(read_user_file(path, what="--edit", limit=MAX_UPLOAD_BYTES), name=path.name)


def _reference(path: Path | None) -> tuple[bytes | None, str | None]:
    if path is None:
        return None, None
    return read_user_file(path, what="--image", limit=MAX_UPLOAD_BYTES), path.name


def run_video(args: argparse.Namespace) -> int:
    from services.backend import create_backend
    from services.cli.common import settings_from_args

    reference, name = _reference(args.image)
    request = VideoRequest(prompt=_prompt(args.prompt), width=args.width, height=args.height, frames=args.frames,
                           fps=args.fps, steps=args.steps, guidance=args.guidance, seed=args.seed,
                           negative_prompt=args.negative_prompt, reference=reference,
                           reference_name=name).validated()  # before any backend starts
    if not args.timeout > 0:
        raise InvalidInput(f"--timeout must be a number of seconds above 0; got {args.timeout:g}")
    check_out(args.out)
    if request.smoke_test and not args.json:
        print(f"note: {request.steps} steps is a smoke test only; the video will not keep the reference's "
              f"composition (use {DEFAULT_STEPS})", file=sys.stderr)
    settings = settings_from_args(args)
    backend = create_backend(settings)
    try:
        figures = _video(backend, settings, request, args)
    finally:
        backend.close()
    saved, mp4 = figures.pop("saved", None), figures.pop("mp4")
    saved = saved or save_output(args.out, mp4, suffix=".mp4")
    written = saved.path
    if args.json:
        print(json.dumps({**_json_outcome([saved]), **figures, "out": written, "backend": backend.name,
                          "target": backend.client("video").target}))
    elif written:
        t, v = figures["timings"], figures["video"]
        model = f", model {t['model_s']:.2f} s, overhead {t['overhead_s']:.2f} s" if "model_s" in t else ""
        print(f"wrote {written}: {v['frames']} frames {v['width']}x{v['height']} at {v['fps']:g} fps "
              f"({v['duration_s']:.2f} s), seed {figures['params']['seed']}, wall {t['wall_s']:.2f} s{model}")
    return _report([saved])


def _video(backend, settings, request: VideoRequest, args: argparse.Namespace) -> dict[str, Any]:
    if args.no_history:
        r = backend.client("video").generate(request, timeout_s=args.timeout)
        info = {"frames": r.info.frames, "width": r.info.width, "height": r.info.height, "fps": r.info.fps,
                "duration_s": round(r.info.duration_s, 4)}
        return {"mp4": r.mp4, "params": r.request.params() | {"body_bytes": r.body_bytes}, "timings": r.timings(),
                "video": info, "job_id": None}
    from services.history import History
    from services.videos import VideoJobs

    jobs = VideoJobs(backend.client("video"), History.of(settings), job_timeout_s=args.timeout, recover=False)
    saved: list[Saved] = []
    # --out is written first, from the worker, before the history's copy: a full data disk loses only that copy
    job = jobs.wait(jobs.start(request, deliver=lambda mp4: saved.append(
        save_output(args.out, mp4, suffix=".mp4"))).id)
    if job.status != "succeeded":
        why = job.error if job.finished else (jobs.problem(job.id) or f"it is still {job.status} (no answer)")
        if saved and saved[0].path:
            raise JobFailed(f"wrote {saved[0].path}, but the history could not keep video job {job.id}: {why}"
                            + (f" ({saved[0].problem})" if saved[0].problem else ""))
        raise JobFailed(f"the video job {job.id} {'ended' if not job.finished else job.status}: {why}")
    m = job.meta
    info = {k: m[k] for k in ("frames", "width", "height", "fps", "duration_s")}
    return {"saved": saved[0] if saved else None, "mp4": None if saved else job.read(VIDEO_FILE),
            "params": job.params, "timings": job.timings, "video": info, "job_id": job.id}


__all__ = ["register", "run_image", "run_video"]
