"""What both the offline engine and the studio use to hear when a person is done: the end-of-turn model (Pipecat's
Smart Turn, from its installed wheel) and the rule that decides a turn by it (`hearing.turn_end`). Below the engine
and the services, above protocol only: the engine's duplex session (offline/listen/turns.py) and the studio's
pipeline conversations (services/converse) take turns by the same rule and the same model."""
