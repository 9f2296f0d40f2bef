// Run ONNX models with onnxruntime-web's WebAssembly backend under Node (no browser):
//   node run-model.mjs model.onnx feeds.json [model2.onnx feeds2.json ...]
// feeds.json: {"name": {"dtype": "float64", "dims": [2, 3], "data": "<base64 of the
// little-endian bytes>"}, ...}. Prints a JSON list, one entry per model: its outputs in the
// same form, or {"error": "..."} where onnxruntime-web refused the model or failed to run
// it. One thread. pt_onnxscript.runtimes.run_onnxruntime_web calls it.
import { readFileSync } from "node:fs";
import * as ort from "onnxruntime-web/wasm";

const TYPED = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

function tensorOf({ dtype, dims, data }) {
  const bytes = Buffer.from(data, "base64");
  const copy = new Uint8Array(bytes).buffer; // aligned for any element size
  const values = new TYPED[dtype](copy);
  return new ort.Tensor(dtype, values, dims);
}

function jsonOf(tensor) {
  const values = tensor.data;
  const bytes = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  return { dtype: tensor.type, dims: tensor.dims, data: bytes.toString("base64") };
}

async function run(modelPath, feedsPath) {
  try {
    const session = await ort.InferenceSession.create(readFileSync(modelPath));
    const given = JSON.parse(readFileSync(feedsPath, "utf8"));
    const feeds = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, tensorOf(v)]));
    const results = await session.run(feeds);
    await session.release();
    return Object.fromEntries(Object.entries(results).map(([k, v]) => [k, jsonOf(v)]));
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) };
  }
}

ort.env.wasm.numThreads = 1;
const args = process.argv.slice(2);
const answers = [];
for (let i = 0; i + 1 < args.length; i += 2) {
  answers.push(await run(args[i], args[i + 1]));
}
process.stdout.write(JSON.stringify(answers));
