"""Only the optional C accelerators live here; everything else is in pyproject.toml.

``engine._wordcount`` speeds up exact token counting (see engine/_wordcount.c), ``engine._chainhash``
the hash chain's BLAKE2b digest (see engine/_chainhash.c). Both are optional: where no C compiler is
available the build skips them and ctxledger computes the same in pure Python (and hashlib).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("engine._wordcount", ["engine/_wordcount.c"], optional=True),
        Extension("engine._chainhash", ["engine/_chainhash.c"], optional=True),
    ]
)
