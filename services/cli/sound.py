"""`python -m services sound` — generate a sound (Stable Audio Open on the real endpoints; a labelled procedural
preview offline); it is written and kept in the history.

    python -m services sound --prompt "rain on a tin roof" [--seconds 10] [--steps 50] [--guidance 7]
                             [--seed N] [--negative-prompt T] [--format wav|flac|mp3] [--out F] [--json]
                             [--no-history] [--url U | --backend sagemaker [--endpoint E]]

Exit code 0 on success; 2 for input that cannot be used (an empty prompt, a length of 0 or over the model's
47.55 s, steps or guidance out of range), before anything is sent; 1 with the target's own message otherwise.
`--json` prints the exact parameters (the seed used included — vLLM-Omni does not report one, so the studio always
sends one), the clip's length and the timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from protocol.errors import InvalidInput
from services.cli.common import ArgumentError, Saved, check_out, read_text, save_output
from services.sound import DEFAULT_SECONDS, SoundRequest
from services.sound.request import DEFAULT_GUIDANCE, DEFAULT_STEPS, FORMATS


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("sound", parents=[common], help="generate a sound (a clip) and write it",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Generate a sound from a prompt: Stable Audio Open 1.0 on the real endpoints "
                                   "(44.1 kHz stereo, up to 47.55 s); a labelled procedural preview offline.")
    p.add_argument("--prompt", required=True, help='what the sound is ("-" reads it from stdin)')
    p.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="the clip's length (more than 0, ≤ 47.55)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="inference steps")
    p.add_argument("--guidance", type=float, default=DEFAULT_GUIDANCE, help="guidance scale")
    p.add_argument("--seed", type=int, help="default: a random seed (printed with --json)")
    p.add_argument("--negative-prompt", help="what to avoid (e.g. 'low quality')")
    p.add_argument("--format", choices=FORMATS, default="wav", help="the file's format")
    p.add_argument("--endpoint", help="the SageMaker sound endpoint (with --backend sagemaker; default: the "
                                      "settings' or the deployment's)")
    p.add_argument("--out", type=Path, help="file to write (default: sound.<format>)")
    p.add_argument("--no-history", action="store_true", help="do not record the run in the studio's history")
    p.set_defaults(func=run_sound)


def run_sound(args: argparse.Namespace) -> int:
    from services.backend import create_backend
    from services.cli.common import settings_from_args

    try:
        request = SoundRequest(prompt=read_text(args.prompt, "--prompt"), seconds=args.seconds, steps=args.steps,
                               guidance=args.guidance, seed=args.seed, negative_prompt=args.negative_prompt,
                               format=args.format).validated().with_seed()
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    out = args.out or Path(f"sound.{args.format}")
    check_out(out)
    settings = settings_from_args(args)
    if args.endpoint:
        settings = settings.with_overrides(sound_endpoint=args.endpoint)
    backend = create_backend(settings)
    try:
        client = backend.client("sound")
        if args.no_history:
            result = client.generate(request)
            audio, params, timings, job_id = result.audio, result.request.params(), result.timings(), None
            seconds, preview = result.seconds, result.preview
        else:
            from services.history import History
            from services.sound import record_sound

            job = record_sound(client, History.of(settings), request)
            audio, params, timings, job_id = job.read(job.outputs[0]), job.params, job.timings, job.id
            seconds, preview = job.meta["seconds"], job.meta.get("preview_note")
        target = client.target
    finally:
        backend.close()
    saved: Saved = save_output(out, audio, suffix=f".{args.format}")
    if args.json:
        print(json.dumps({"ok": saved.problem is None, "error": saved.problem, "params": params, "seed": params["seed"],
                          "seconds": seconds, "timings": timings, "preview": preview, "out": saved.path,
                          "job_id": job_id, "backend": backend.name, "target": target}))
    elif saved.path:
        label = " (offline preview)" if preview else ""
        print(f"wrote {saved.path}{label}: {seconds:.2f} s, {params['steps']} steps, seed {params['seed']}, "
              f"total {timings['total_s']:.2f} s")
    if saved.problem:
        print(f"error: {saved.problem}", file=sys.stderr)
        return 1
    return 0
