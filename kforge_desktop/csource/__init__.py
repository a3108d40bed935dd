"""C/C++/CUDA source as plain text: comments, top-level items, compiler-driven fixes, duplicates.

Plain text in, plain text out; this package imports nothing from the rest of the project (only the
standard library), so the search, the prompts and the extraction of answers can all share it.

- ``comments``: strip or blank ``//`` and ``/* */`` comments.
- ``items``: the top-level items of a file (functions, structs, lines); find, replace, prune them.
- ``autofix``: mechanical fixes driven by the compiler's own error messages.
- ``language``: which language a piece of code is written in (Python, C++, CUDA).
- ``normalize``: a canonical form of a candidate's code, for duplicate detection.
"""
