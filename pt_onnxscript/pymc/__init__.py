"""PyMC support that grows past the log-density (needs the `pymc` extra): the many-chain
sampler (`sampling`). `pt_onnxscript.pymc_model` is the name users import."""
