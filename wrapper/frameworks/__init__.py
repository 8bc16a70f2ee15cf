"""The framework adapters' own folder: what ``wrapper.langchain`` and ``wrapper.llama_index`` share
(``shared``). The adapters themselves keep their public paths, ``wrapper.langchain`` and
``wrapper.llama_index``."""
