"""The offline analyst: a deterministic, network-free model behind every agent (its classifier,
cues, signals and training data). Used by the agents through the provider contract of runs."""
