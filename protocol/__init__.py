"""The ground every layer stands on: one pydantic model per wire message, every limit, the shared errors.

- protocol.speech    the `/v1/audio/speech/stream` WebSocket messages and REST speech
- protocol.voices    `/v1/audio/voices`: upload, list and delete named voices for cloning
- protocol.listen    `/v1/realtime` transcription events and `POST /v1/audio/transcriptions` (docs/listen.md)
- protocol.images    `POST /v1/images/generations` and `POST /v1/images/edits`
- protocol.videos    `POST /v1/videos/sync` (multipart form fields)
- protocol.common    JSON framing, REST error bodies, health, the model list, response headers
- protocol.sagemaker the three roles, CustomAttributes routing, the speech invocation path, the state file
- protocol.limits    sizes, frames, steps, seeds, upload caps: each number defined once
- protocol.errors    the error types every layer raises and shows

It imports nothing of the project's own. docs/protocols.md describes the contracts and their sources.
"""
