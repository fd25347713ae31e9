"""Everything the tests share that is not a test: data builders, helpers and the
browser. The fixtures themselves are declared in ``tests/conftest.py``."""
