// The sampler demo's page: asks its worker (sampler-worker.mjs) to sample, shows progress, then
// summarises and draws the posterior. window.sampleInBrowser(seed, draws) is the same run for
// tests: it resolves with every output's draws as plain arrays.
import { startingFeed } from './sampler-seed.mjs';

const $ = (id) => document.getElementById(id);
const worker = new Worker('./sampler-worker.mjs', { type: 'module' });
const COLOURS = ['#1b6ca8', '#d1495b', '#3a7d44', '#edae49', '#6c4f9c', '#00798c', '#8d6a9f', '#444'];
let meta = null;
let pending = null;

function showError(message) {
  $('error').textContent = `Error: ${message}`;
  window.__error = message;
}

worker.onerror = (event) => showError(event.message || 'the worker failed to start');
worker.onmessage = (event) => {
  const message = event.data;
  if (message.type === 'loaded') {
    meta = message.meta;
    $('status').textContent = `sampler loaded: ${(message.bytes / 1000).toFixed(0)} kB in ` +
      `${message.seconds.toFixed(1)} s (onnxruntime-web ${message.version}); ${meta.chains} chains, ` +
      `${meta.tune} warm-up transitions`;
    $('run').disabled = false;
    window.startingFeed = (seed) => startingFeed(meta, seed);
    window.__ready = true;
  } else if (message.type === 'progress') {
    $('progress').value = message.done / message.total;
    const phase = message.done <= message.warmup ? 'warm-up' : 'draws';
    $('status').textContent = `${message.done} / ${message.total} transitions (${phase}), ${message.seconds.toFixed(1)} s`;
  } else if (message.type === 'done') {
    $('run').disabled = false;
    const { resolve } = pending;
    pending = null;
    resolve(message);
  } else if (message.type === 'error') {
    $('run').disabled = false;
    showError(message.message);
    if (pending) { pending.reject(new Error(message.message)); pending = null; }
  }
};

function run(seed, draws, warmup = false) {
  if (pending) return Promise.reject(new Error('a run is under way'));
  $('run').disabled = true;
  $('error').textContent = '';
  $('progress').value = 0;
  return new Promise((resolve, reject) => {
    pending = { resolve, reject };
    worker.postMessage({ type: 'sample', seed, draws, warmup });
  });
}

// Each posterior variable's draws as columns: [label, Float64Array of draws x chains].
function columns(outputs) {
  const result = [];
  for (const entry of meta.posterior) {
    const { data, dims } = outputs[entry.output];
    const size = entry.shape.reduce((a, b) => a * b, 1);
    const rows = data.length / size;
    const labels = entry.dims && entry.dims[0] ? meta.coords[entry.dims[0]] : null;
    for (let j = 0; j < size; j++) {
      const values = new Float64Array(rows);
      for (let i = 0; i < rows; i++) values[i] = data[i * size + j];
      result.push([size === 1 ? entry.name : `${entry.name}[${labels ? labels[j] : j}]`, values, dims]);
    }
  }
  return result;
}

function quantile(sorted, q) {
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (position - low);
}

function summarise(name, values) {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1));
  const sorted = Float64Array.from(values).sort();
  const cells = [mean, sd, quantile(sorted, 0.03), quantile(sorted, 0.97)].map((v) => `<td>${v.toFixed(2)}</td>`);
  return `<tr><td>${name}</td>${cells.join('')}</tr>`;
}

function histogram(name, values) {
  const canvas = document.createElement('canvas');
  canvas.width = 170;
  canvas.height = 90;
  const sorted = Float64Array.from(values).sort();
  const low = quantile(sorted, 0.005);
  const high = quantile(sorted, 0.995);
  const bins = new Array(30).fill(0);
  for (const v of values) {
    if (v >= low && v <= high) bins[Math.min(29, Math.floor(((v - low) / (high - low || 1)) * 30))]++;
  }
  const context = canvas.getContext('2d');
  const tallest = Math.max(...bins);
  context.fillStyle = COLOURS[0];
  bins.forEach((count, i) => {
    const h = (80 * count) / tallest;
    context.fillRect(5 + i * 5.3, 85 - h, 4.6, h);
  });
  const figure = document.createElement('figure');
  const caption = document.createElement('figcaption');
  caption.textContent = `${name}: ${low.toFixed(1)} to ${high.toFixed(1)}`;
  figure.append(canvas, caption);
  return figure;
}

function trace(values, chains) {
  const canvas = $('trace');
  const context = canvas.getContext('2d');
  context.clearRect(0, 0, canvas.width, canvas.height);
  const draws = values.length / chains;
  const low = Math.min(...values);
  const high = Math.max(...values);
  for (let c = 0; c < chains; c++) {
    context.strokeStyle = COLOURS[c % COLOURS.length];
    context.globalAlpha = 0.7;
    context.beginPath();
    for (let i = 0; i < draws; i++) {
      const x = (canvas.width * i) / Math.max(draws - 1, 1);
      const y = canvas.height - 5 - ((canvas.height - 10) * (values[i * chains + c] - low)) / (high - low || 1);
      if (i === 0) context.moveTo(x, y); else context.lineTo(x, y);
    }
    context.stroke();
  }
}

function show({ outputs, seconds }, draws) {
  const divergences = outputs.diverging.data.reduce((a, b) => a + b, 0);
  $('status').textContent = `${meta.chains} chains x ${draws} draws after ${meta.tune} warm-up ` +
    `transitions in ${seconds.toFixed(1)} s; ${divergences} divergences`;
  const all = columns(outputs);
  $('summary').innerHTML = '<tr><th>variable</th><th>mean</th><th>sd</th><th>3%</th><th>97%</th></tr>' +
    all.map(([name, values]) => summarise(name, values)).join('');
  $('histograms').replaceChildren(...all.map(([name, values]) => histogram(name, values)));
  trace(all.find(([name]) => name === 'mu')?.[1] ?? all[0][1], meta.chains);
  $('results').hidden = false;
}

$('controls').addEventListener('submit', async (event) => {
  event.preventDefault();
  const seed = Number($('seed').value);
  const draws = Number($('draws').value);
  if (!Number.isSafeInteger(seed) || seed < 0 || !Number.isInteger(draws) || draws < 1) {
    showError('the seed must be a whole number >= 0 and the draws a whole number >= 1');
    return;
  }
  try {
    const result = await run(seed, draws);
    show(result, draws);
  } catch (error) {
    showError(error.message ?? String(error));
  }
});

// For tests: the same run as the button's, its outputs as plain arrays (with `warmup`, the
// warm-up's transitions before the draws, and nothing shown).
window.sampleInBrowser = async (seed, draws, warmup = false) => {
  const result = await run(seed, draws, warmup);
  if (!warmup) show(result, draws);
  const plain = {};
  for (const [name, { data, dims }] of Object.entries(result.outputs)) {
    plain[name] = { data: Array.from(data, Number), dims };
  }
  return { outputs: plain, seconds: result.seconds };
};

worker.postMessage({ type: 'load' });
