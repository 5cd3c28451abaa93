"""Adapters that put a ctxledger session under the agent frameworks people already use.

Each adapter lives in its own module and imports its framework when that module is imported, never
from ``import engine``; a missing framework is a one-line ``ImportError`` naming the extra to install.
"""
