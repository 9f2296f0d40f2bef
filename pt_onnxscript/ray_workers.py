"""Exported models run across Ray workers, each owning one ONNX Runtime session.

``OnnxWorkers(model, workers=4)`` starts `workers` Ray actors that each build an ONNX
Runtime session of `model` once (the model's bytes go through Ray's object store, so the
workers need no shared filesystem); ``workers.map(feeds)`` runs each dict of inputs on the
next worker, all of them at once, and returns the outputs in the order given. The work a
PyMC model spreads this way: batches of posterior draws through an exported posterior
predictive (`pymc_model.export_posterior_predictive`), or chains of an exported sampler
(`pymc_model.export_sampler`), each worker given its own random state.

On one machine ``ray.init()`` (which `OnnxWorkers` calls if Ray is not running) starts a
local cluster; on a real cluster connect first (``ray.init(address="auto")`` on a node of
it, or ``ray.init("ray://head:10001")`` from outside), and ask for one CPU per ONNX Runtime
thread (`threads`) so Ray places the actors on nodes that have them.
"""

import numpy as np
import onnx


class _Session:
    """A Ray actor's state: one ONNX Runtime session."""

    def __init__(self, model_bytes: bytes, threads: int):
        import onnxruntime as ort

        from pt_onnxscript.linker import session_options

        self.session = ort.InferenceSession(
            model_bytes, session_options(threads), providers=["CPUExecutionProvider"]
        )
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: dict) -> dict:
        return dict(zip(self.names, self.session.run(None, feeds), strict=True))


class OnnxWorkers:
    """`workers` Ray actors running `model` (an onnx.ModelProto or the path of a .onnx
    file), each with `threads` ONNX Runtime threads and as many CPUs reserved."""

    def __init__(self, model, workers: int = 2, threads: int = 1):
        import ray

        for value, name in ((workers, "workers"), (threads, "threads")):
            if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be an int >= 1, not {value!r}")
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load(model)
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        actor = ray.remote(num_cpus=threads)(_Session)
        blob = ray.put(model.SerializeToString())
        self._actors = [actor.remote(blob, threads) for _ in range(workers)]

    def map(self, feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        """The outputs of each dict of inputs in `feeds`, run on the workers in turn."""
        import ray

        pending = [
            self._actors[i % len(self._actors)].run.remote(feed) for i, feed in enumerate(feeds)
        ]
        return ray.get(pending)

    def close(self) -> None:
        """Stop the workers."""
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
