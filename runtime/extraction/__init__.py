"""Content read out of a page without selectors: its main text as Markdown (`markdown.py`), its structured data
(`structured.py`)."""
