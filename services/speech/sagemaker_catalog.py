"""The voice endpoint's catalog on SageMaker: which voices, languages and task types its model offers.

SageMaker forwards only POSTs to a container, so vLLM-Omni's `GET /v1/audio/voices` is out of reach: the model
id (the settings', the state file's, or the endpoint's container's) names them.
"""

from __future__ import annotations

import threading

from protocol.errors import BackendUnreachable, ServerError
from protocol.speech import QWEN3_TTS_LANGUAGES, QWEN3_TTS_SPEAKERS, TaskType, task_types_for_model
from services.aws import AwsSession, endpoint_model, missing_endpoint

UNKNOWN_MODEL = "unknown"


class SageMakerCatalog:
    """Voices, languages and task types of the voice endpoint's model: the state file's `voice_model` when it
    names this endpoint's model, else its container's model id (control plane describes, read once).

    SageMaker only forwards POSTs to a container, so vLLM-Omni's `GET /v1/audio/voices` is out of reach;
    the model id names the speakers. "default" (the model's own default speaker) always comes first."""

    def __init__(self, aws: AwsSession, endpoint: str | None, model: str | None = None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self._model: str | None = model
        self._lock = threading.Lock()
        self.problem: str | None = None  # what could not be read, when the model id is unknown

    def model_id(self) -> str:
        """The model id, looked up once when neither the settings nor the state file say; "unknown" when the
        control plane cannot be read (credentials that may only invoke): `problem` then says what and why."""
        if self.endpoint is None:
            raise missing_endpoint("voice")
        with self._lock:
            if self._model is None:
                try:
                    self._model = endpoint_model(self.aws, self.endpoint)
                except (ServerError, BackendUnreachable) as exc:  # denied, or no control plane: invoking may work
                    self._model = UNKNOWN_MODEL
                    self.problem = (f"could not read which model endpoint {self.endpoint} serves ({exc}); every "
                                    "Qwen3-TTS voice and language is offered and sent as chosen — set voice_model "
                                    "in the settings to name it")
            return self._model

    @property
    def known(self) -> bool:
        return self.model_id() != UNKNOWN_MODEL

    def voices(self) -> list[str]:
        model = self.model_id().lower()
        if not self.known or ("qwen3-tts" in model and "customvoice" in model):
            return ["default", *QWEN3_TTS_SPEAKERS]
        return ["default"]

    def languages(self) -> list[str]:
        return list(QWEN3_TTS_LANGUAGES) if not self.known or "qwen3-tts" in self.model_id().lower() else ["Auto"]

    def task_types(self) -> tuple[TaskType, ...]:
        return task_types_for_model(self.model_id()) if self.known else ("CustomVoice",)

    def deploy_hint(self, models: list[str]) -> str:
        return f"deploy one as the voice endpoint: `python -m infra deploy --voice-model {models[-1]}`"
