"""What both the offline engine and the studio use to hear a person: where they speak (`hearing.vad`, the Silero
VAD) and when they are done (`hearing.turn_end`, Pipecat's Smart Turn model from its installed wheel, and the rule
that decides a turn by it). Below the engine and the services, above protocol only: the engine's recognizer and
duplex session (offline/listen) and the studio's turn taking and barge-in (services/converse) hear by the same
models and the same rules."""
