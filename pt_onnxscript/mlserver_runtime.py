"""An MLServer inference runtime that serves an exported model with ONNX Runtime, speaking
the Open Inference Protocol (KServe V2) over REST and gRPC.

MLServer (``pip install pt_onnxscript[serving]``) imports this module when it loads a model
whose settings name ``pt_onnxscript.mlserver_runtime.OnnxRuntimeModel`` (written by
`serving.export_mlserver_model`). Tensors go in and out with their exact dtypes and shapes
(FP64 for float64; a 0-d tensor has shape []), not through MLServer's NumPy codec, which
appends a dim to 1-d outputs. With ``max_batch_size`` in the model's settings, MLServer's
adaptive batching joins concurrent requests along their first dim into one ONNX Runtime
call and splits the outputs back.
"""

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs.numpy import to_datatype, to_dtype
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput
from mlserver.utils import get_model_uri

from pt_onnxscript.linker import session_options


class OnnxRuntimeModel(MLModel):
    """One ONNX Runtime session (threads: the settings' ``extra.threads``, by default ONNX
    Runtime's pool of one thread per core that sleeps between calls)."""

    async def load(self) -> bool:
        uri = await get_model_uri(self._settings, wellknown_filenames=["model.onnx"])
        extra = (self._settings.parameters.extra or {}) if self._settings.parameters else {}
        self._session = ort.InferenceSession(
            uri, session_options(extra.get("threads")), providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name: i for i in self._session.get_inputs()}
        self._outputs = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {}
        for request_input in payload.inputs:
            if request_input.name not in self._inputs:
                raise InferenceError(
                    f"{self.name} has no input {request_input.name!r}; its inputs are "
                    f"{list(self._inputs)}"
                )
            data = getattr(request_input.data, "root", request_input.data)
            array = np.array(data, dtype=to_dtype(request_input))
            feeds[request_input.name] = array.reshape(request_input.shape)
        missing = [name for name in self._inputs if name not in feeds]
        if missing:
            raise InferenceError(f"{self.name} needs the inputs {missing} too")
        try:
            results = self._session.run(self._outputs, feeds)
        except Exception as err:  # ONNX Runtime's errors share no base class
            raise InferenceError(f"{self.name}: ONNX Runtime refused the request: {err}") from err
        outputs = [
            ResponseOutput(
                name=name,
                datatype=to_datatype(value.dtype),
                shape=list(value.shape),
                data=value.reshape(-1).tolist(),
            )
            for name, value in zip(self._outputs, results, strict=True)
        ]
        return InferenceResponse(model_name=self.name, model_version=self.version, outputs=outputs)
