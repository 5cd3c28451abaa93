"""Only the optional C accelerator lives here; everything else is in pyproject.toml.

``engine._wordcount`` speeds up exact token counting (see engine/_wordcount.c). It is optional: where
no C compiler is available the build skips it and ctxledger counts the same in pure Python
(``CTXLEDGER_NO_NATIVE=1`` makes an installed build do so too).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("engine._wordcount", ["engine/_wordcount.c"], optional=True),
    ]
)
