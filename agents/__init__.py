"""The agents: graphs of nodes, their output schemas, the model providers that speak to real
models, the context each agent is shown, and the citation checks. Built on the run engine (runs)."""
