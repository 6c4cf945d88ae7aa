"""Streamlit helpers shared by the pages (UI layer: may import streamlit, never boto3/httpx/websockets)."""
