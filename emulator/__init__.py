"""A local SageMaker emulator that the real boto3 and HTTP/2 SDK clients talk to unchanged.

- control plane: models, endpoint configs (InstancePools, InferenceAmiVersion), endpoints with real
  status progression, tags; Service Quotas; STS GetCallerIdentity (`control`, `registry`)
- runtime: realtime and async invocations routed to the offline engine like the DLC (`runtime`)
- the HTTP/2 bidirectional stream over TLS, bridged to the engine's WebSocket (`bidi`, `tls`)
- fault injection: capacity, Failed endpoints, expiring credentials, cut streams (`config`)

Run it with `python -m emulator`; tests use `tests/emulator_support.py`.
"""
