"""`streamlit run serve.py`: the studio (app.py) with a health check of its storage in front of Streamlit's.

Streamlit serves `/_stcore/health` itself (200 once its runtime is ready); a load balancer in front of a team
studio's replicas must also learn when a replica's database or bucket does not answer. `st.App` runs app.py
unchanged and lets a middleware answer that route first (services/storage_health.py). Every way the studio is
started goes through here: `make studio` (scripts/studio.py), the image, the rehearsal and the browser tests.
"""

import streamlit as st
from starlette.middleware import Middleware

from services.storage_health import StorageHealth

app = st.App("app.py", middleware=[Middleware(StorageHealth)])
