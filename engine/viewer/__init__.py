"""The local web viewer behind ``ctxledger serve``: time-travel replay of sessions in a browser.

``from engine.viewer.app import create_app`` needs the ``serve`` extra (Starlette, uvicorn); the
modules that build pages and data (``pages``, ``data``, ``escape``) need nothing beyond ctxledger.
"""

__all__: list[str] = []
