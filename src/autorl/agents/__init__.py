"""The built-in agents (trusted, outside the sandbox): ``command`` (an agent folder with a start script), ``llm``
(a tool loop over an OpenAI-compatible model) and ``example``; and the files they start in the workspace
(``example/``, ``coding/``)."""
