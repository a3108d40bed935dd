"""The language model side of Kernel Forge Desktop.

- ``generator``: the ``Generator`` protocol, ``GenerationRequest`` and ``Generation``.
- ``llama_backend``: a GGUF in this process through llama.cpp (imported lazily).
- ``server_backend``: an OpenAI-compatible server on this machine.
- ``gguf``, ``default_model``, ``discovery``: reading headers, fetching and finding models.
- ``extract``: code out of an answer.  (``prompts`` belongs to the search package's authors.)

Importing this package never imports llama_cpp, so the engine imports on a GPU box without it.
"""

from __future__ import annotations

import os

from .discovery import ModelNotFound, resolve_model
from .extract import Extraction, extract_code
from .generator import Generation, GenerationError, GenerationRequest, Generator, Message

__all__ = [
    "Extraction", "Generation", "GenerationError", "GenerationRequest", "Generator", "Message",
    "ModelNotFound", "extract_code", "open_generator", "resolve_model",
]


def open_generator(llm: str | os.PathLike[str] | None = None, server: str | None = None,
                   server_model: str | None = None, allow_remote: bool = False, **llama_kwargs) -> Generator:
    """The generator the app should use: a local server when ``server`` is given, else a GGUF.

    The GGUF is ``llm``, else ``$KFORGE_MODEL``, else the default model (``resolve_model``). Raises
    ``ModelNotFound`` or ``GenerationError`` with one sentence.
    """
    if server:
        from .server_backend import OpenAIServerGenerator

        return OpenAIServerGenerator(server, model=server_model, allow_remote=allow_remote)
    from .llama_backend import LlamaCppGenerator

    return LlamaCppGenerator(resolve_model(llm), **llama_kwargs)
