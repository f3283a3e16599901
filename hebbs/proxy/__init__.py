"""`hebbs proxy`: an OpenAI-compatible chat endpoint on 127.0.0.1 that gives any client a memory.

For each chat completion it recalls for the latest user message (the project vault and the global
brain, through the daemon), adds what it found as a system message with citations (nothing when
recall abstains), forwards the request to the upstream server and passes its answer back as is,
streamed or not; with `remember` it stores the exchange in the project vault. docs/proxy.md.
"""

from .app import ProxyConfig, build_app

__all__ = ["ProxyConfig", "build_app"]
