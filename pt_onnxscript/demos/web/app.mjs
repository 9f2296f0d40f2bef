import * as ort from './ort/ort.wasm.min.mjs';

ort.env.wasm.wasmPaths = new URL('./ort/', import.meta.url).href;
ort.env.wasm.numThreads = 1;
ort.env.wasm.proxy = false;

const $ = (id) => document.getElementById(id);
const pad = $('pad');
const context = pad.getContext('2d');
let session = null;
let samples = null;

function showError(error) {
  $('error').textContent = `Error: ${error.message ?? error}`;
  window.__error = String(error.message ?? error);
}

// Probabilities (n x 10) for n images of 8 x 8 values in [0, 1], flattened row by row.
async function classify(pixels, n) {
  const input = new ort.Tensor('float32', Float32Array.from(pixels), [n, 1, 8, 8]);
  const result = await session.run({ [session.inputNames[0]]: input });
  return Array.from(result[session.outputNames[0]].data);
}

// The ten bars, empty without probabilities: the table keeps its size either way.
function show(probabilities, label) {
  const best = probabilities ? probabilities.indexOf(Math.max(...probabilities)) : null;
  $('prediction').textContent = probabilities ? String(best) : '\u2013';
  $('label').textContent = label === undefined ? '' : `(label ${label})`;
  $('probabilities').innerHTML = Array.from({ length: 10 }, (_, digit) => {
    const p = probabilities ? probabilities[digit] : 0;
    return `<tr><td class="digit">${digit}</td><td class="bar-cell"><div class="bar" style="width:${(200 * p).toFixed(1)}px"></div></td>` +
      `<td class="p">${probabilities ? p.toFixed(4) : '\u2013'}</td></tr>`;
  }).join('');
}

function preview(pixels) {
  const image = $('preview').getContext('2d').createImageData(8, 8);
  pixels.forEach((v, i) => {
    image.data.set([255 * v, 255 * v, 255 * v, 255], 4 * i);
  });
  $('preview').getContext('2d').putImageData(image, 0, 0);
}

// The drawing averaged over 32 x 32 blocks: the 8 x 8 input the model was trained on.
function downsample() {
  const data = context.getImageData(0, 0, pad.width, pad.height).data;
  const block = pad.width / 8;
  const pixels = new Array(64).fill(0);
  for (let y = 0; y < pad.height; y++) {
    for (let x = 0; x < pad.width; x++) {
      pixels[8 * Math.floor(y / block) + Math.floor(x / block)] += data[4 * (y * pad.width + x)] / 255;
    }
  }
  return pixels.map((v) => v / (block * block));
}

async function classifyDrawing() {
  try {
    const pixels = downsample();
    preview(pixels);
    show(await classify(pixels, 1));
  } catch (error) {
    showError(error);
  }
}

// An 8 x 8 image drawn on the pad, each pixel a 32 x 32 block.
function drawOnPad(pixels) {
  const block = pad.width / 8;
  pixels.forEach((v, i) => {
    const grey = Math.round(255 * v);
    context.fillStyle = `rgb(${grey}, ${grey}, ${grey})`;
    context.fillRect(block * (i % 8), block * Math.floor(i / 8), block, block);
  });
}

async function classifySample(index) {
  try {
    const pixels = samples.images[index].flat();
    drawOnPad(pixels);
    preview(pixels);
    show(await classify(pixels, 1), samples.labels[index]);
  } catch (error) {
    showError(error);
  }
}

// A black pad, a black preview, empty bars, no sample chosen (so any can be picked again).
function clear() {
  context.fillStyle = '#000';
  context.fillRect(0, 0, pad.width, pad.height);
  preview(new Array(64).fill(0));
  show(null);
  $('sample').value = '';
}

let drawing = false;
// Where a pointer is on the pad, in the pad's own 256 x 256 pixels (it may be shown smaller).
function onPad(event) {
  const box = pad.getBoundingClientRect();
  const scale = pad.width / box.width;
  return [(event.clientX - box.left) * scale, (event.clientY - box.top) * scale];
}
function stroke(event) {
  context.lineTo(...onPad(event));
  context.stroke();
}
// Pointer events: mouse, pen and touch alike (the pad's touch-action is none, so a finger
// draws instead of scrolling the page); captured, so a stroke leaving the pad still ends.
pad.addEventListener('pointerdown', (event) => {
  drawing = true;
  if (event.isTrusted) pad.setPointerCapture(event.pointerId);
  if ($('sample').value !== '') {  // drawing over a picked sample starts a new drawing
    clear();
  }
  context.beginPath();
  context.moveTo(...onPad(event));
});
pad.addEventListener('pointermove', (event) => { if (drawing) stroke(event); });
pad.addEventListener('pointerup', () => { drawing = false; classifyDrawing(); });
pad.addEventListener('pointercancel', () => { drawing = false; });
$('clear').addEventListener('click', clear);
$('sample').addEventListener('change', (event) => {
  if (event.target.value === '') {
    clear();
  } else {
    classifySample(Number(event.target.value));
  }
});

async function start() {
  clear();
  context.strokeStyle = '#fff';
  context.lineWidth = 28;
  context.lineCap = 'round';
  context.lineJoin = 'round';
  try {
    const response = await fetch('./samples.json');
    if (!response.ok) throw new Error(`samples.json: HTTP ${response.status}`);
    samples = await response.json();
    $('sample').innerHTML = '<option value="">\u2013</option>' +
      samples.labels.map((label, i) => `<option value="${i}">#${i} (${label})</option>`).join('');
    $('sample').value = '0';
    // The model's download and session creation, timed together: what a visitor waits for.
    const loading = performance.now();
    const model = await fetch('./model/digits.onnx');
    if (!model.ok) throw new Error(`digits.onnx: HTTP ${model.status}`);
    const bytes = new Uint8Array(await model.arrayBuffer());
    session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
    const milliseconds = performance.now() - loading;
    $('status').textContent = `model loaded: ${(bytes.length / 1000).toFixed(1)} kB in ` +
      `${milliseconds.toFixed(0)} ms (onnxruntime-web ${ort.env.versions.web})`;
    // Told to the demo's server, which prints it (the server may be another; not an error).
    fetch('./loaded', { method: 'POST', body: JSON.stringify({ bytes: bytes.length, milliseconds }) })
      .catch(() => {});
    await classifySample(Number($('sample').value));  // the preselected sample, at once
    window.classify = classify;
    window.__ready = true;
  } catch (error) {
    showError(error);
    $('status').textContent = 'the model could not be loaded';
  }
}

start();
