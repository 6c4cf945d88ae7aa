"""Sound studio: a prompt, a length and the model's settings in; a 44.1 kHz stereo clip out (Stable Audio Open on
the real endpoints, a labelled procedural preview offline) — and every sound kept so far, to play, share or reuse."""

from __future__ import annotations

import streamlit as st

from protocol.limits import SOUND_GUIDANCE, SOUND_SECONDS
from services.sound.request import FORMATS
from ui import resources
from ui.gallery_views import browse, linked_item
from ui.sidebar import sidebar
from ui.sound_views import generate, init_state, reuse, sounds
from ui.text import plain
from ui.workspace_views import may

state = st.session_state

sidebar()
st.title("Sound")
st.caption(f"Sound effects, ambiences and short music from a prompt — up to {SOUND_SECONDS.hi:.2f} s of 44.1 kHz "
           "stereo. The same prompt, settings and seed make the same sound again. Every sound is kept below; use "
           "one as a clip's soundtrack on the video page.")

history = resources.require_history()
backend = resources.require_backend("The sound backend", family="sound")  # SageMaker without one: said here
init_state()


def _kept(empty: str = "No sounds yet: write a prompt and press **Generate**.") -> None:
    if not history.jobs.count("sound"):
        linked_item(history, "sound")
        st.info(empty)
        st.stop()
    st.subheader("Sounds")
    browse(history, "sound", "sound_gallery",
           lambda jobs, prefix: sounds(jobs, history=history, on_reuse=lambda j: reuse(history, j), key_prefix=prefix))


if not may("generate"):
    _kept("No sounds shared with the team yet.")
    st.stop()

with st.form("sound_form", border=False):
    st.text_area("Prompt", key="sound_prompt", height=90, placeholder="Rain on a tin roof, distant thunder")
    st.text_input("Negative prompt", key="sound_negative", placeholder="what to avoid (optional), e.g. low quality")
    c = st.columns(5)
    c[0].number_input("Seconds", key="sound_seconds", min_value=0.5, max_value=float(f"{SOUND_SECONDS.hi:.2f}"),
                      step=0.5, help=f"the clip's length: more than 0, at most {SOUND_SECONDS.hi:.2f} s")
    c[1].number_input("Steps", key="sound_steps", min_value=1, max_value=1000, step=1,
                      help="diffusion steps: more is slower; Stable Audio Open's default is 50")
    c[2].number_input("Guidance", key="sound_guidance", min_value=SOUND_GUIDANCE.lo, max_value=20.0, step=0.5,
                      help="how closely it follows the prompt (the model's default is 7)")
    c[3].text_input("Seed", key="sound_seed", placeholder="random", help="blank: a random seed (kept with the sound)")
    c[4].selectbox("Format", FORMATS, key="sound_format")
    st.form_submit_button("Generate", type="primary", on_click=lambda: generate(backend, history))
if state.get("sound_error"):
    st.error(plain(state["sound_error"]))

_kept()
