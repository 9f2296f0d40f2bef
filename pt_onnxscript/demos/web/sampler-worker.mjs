// The sampler demo's worker: loads the exported sampler into onnxruntime-web (WebAssembly) and
// runs it in calls of `chunk` transitions, each resuming where the last stopped, reporting
// progress after each; the page stays responsive while it samples.
import * as ort from './ort/ort.wasm.min.mjs';
import { startingFeed } from './sampler-seed.mjs';

ort.env.wasm.wasmPaths = new URL('./ort/', import.meta.url).href;
ort.env.wasm.numThreads = 1;
ort.env.wasm.proxy = false;

let session = null;
let meta = null;

// The first inputs for a seed: sampler-seed.mjs's starts, the initial adaptation state.
function firstFeed(seed) {
  const { position, rng } = startingFeed(meta, seed);
  return {
    position: new ort.Tensor('float64', position, [meta.chains, meta.initial_point.length]),
    state: new ort.Tensor('float64', Float64Array.from(meta.initial_state), [meta.initial_state.length]),
    rng: new ort.Tensor('uint64', rng, [2]),
    target_accept: new ort.Tensor('float64', Float64Array.from([0.8]), []),
  };
}

const row = (dims) => dims.reduce((a, b) => a * b, 1);
const scalar = (value) => new ort.Tensor('int64', BigInt64Array.from([BigInt(value)]), []);

// The draws after the warm-up (with `warmup`, the warm-up's before them): every output but the
// state's, concatenated over the calls.
async function sample(seed, draws, warmup) {
  const feed = firstFeed(seed);
  const total = meta.tune + draws;
  const kept = {};
  const began = performance.now();
  for (let done = 0; done < total;) {
    const size = Math.min(meta.chunk, total - done);
    const out = await session.run({ ...feed, start: scalar(done), transitions: scalar(size) });
    feed.position = new ort.Tensor('float64', out.positions.data.slice(-feed.position.data.length), feed.position.dims);
    feed.state = out.state_updated;
    feed.rng = out.rng_updated;
    const skip = warmup ? 0 : Math.max(0, meta.tune - done);  // warm-up transitions left out
    for (const name of session.outputNames) {
      if (name === 'state_updated' || name === 'rng_updated' || skip >= size) continue;
      const tensor = out[name];
      const width = tensor.data.length / size;
      (kept[name] ??= { parts: [], dims: tensor.dims.slice(1) }).parts.push(tensor.data.slice(skip * width));
    }
    done += size;
    postMessage({ type: 'progress', done, total, warmup: meta.tune, seconds: (performance.now() - began) / 1000 });
  }
  const outputs = {};
  for (const [name, { parts, dims }] of Object.entries(kept)) {
    const data = new parts[0].constructor(parts.reduce((sum, part) => sum + part.length, 0));
    let offset = 0;
    for (const part of parts) { data.set(part, offset); offset += part.length; }
    outputs[name] = { data, dims: [data.length / row(dims), ...dims] };
  }
  return { outputs, seconds: (performance.now() - began) / 1000 };
}

onmessage = async (event) => {
  try {
    if (event.data.type === 'load') {
      const began = performance.now();
      meta = await (await fetch('./sampler.json')).json();
      const response = await fetch('./model/sampler.onnx');
      if (!response.ok) throw new Error(`sampler.onnx: HTTP ${response.status}`);
      const bytes = new Uint8Array(await response.arrayBuffer());
      session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
      postMessage({ type: 'loaded', meta, bytes: bytes.length, seconds: (performance.now() - began) / 1000, version: ort.env.versions.web });
    } else if (event.data.type === 'sample') {
      const result = await sample(event.data.seed, event.data.draws, event.data.warmup);
      postMessage({ type: 'done', ...result });
    }
  } catch (error) {
    postMessage({ type: 'error', message: String(error.message ?? error) });
  }
};
