"""Rendering records: the terminal table, markdown, pytest-benchmark JSON, HTML and SVG. Pure."""
