"""The offline tools: `top`, `explain`, `eval-pinch`, `mock-upstream` and the transcripts they read.

Nothing the server runs imports this package (an import-linter contract in pyproject.toml says so).
"""
