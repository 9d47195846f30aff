"""The engine simulator behind `overspill sim`: vLLM, Ollama and cloud personalities.

It models what makes serving LLMs hard (continuous batching, a paged KV cache with automatic prefix
caching, queueing, cold model loads) and speaks the engines' real wire formats, so that routing,
overflow, caching and failure behaviour measured against it carry over to the real engines.
"""
