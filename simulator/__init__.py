"""moesim's simulator: the stream-program IR, the SimPy engine, checkers, models and CLI."""
