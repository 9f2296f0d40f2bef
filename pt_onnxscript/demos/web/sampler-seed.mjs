// A seed's starting positions and random state for the sampler demo, as
// pt_onnxscript.demos.sampler.starting_feed makes them: each chain at the initial point plus
// uniform [-1, 1) jitter (PyMC's default), the uniforms the top 53 bits of SplitMix64 outputs
// from the seed; the generator's key the next output (its state is [key, 0]).
const MASK = (1n << 64n) - 1n;

// Vigna's SplitMix64: [next state, output].
export function splitmix64(state) {
  const next = (state + 0x9E3779B97F4A7C15n) & MASK;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK;
  return [next, z ^ (z >> 31n)];
}

// { position: Float64Array (chains x n, row by row), rng: BigUint64Array [key, 0] }.
export function startingFeed(meta, seed) {
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed must be an integer in [0, 2**53), not ${seed}`);
  const initial = meta.initial_point;
  const n = initial.length;
  const position = new Float64Array(meta.chains * n);
  let state = BigInt(seed);
  let z;
  for (let i = 0; i < position.length; i++) {
    [state, z] = splitmix64(state);
    position[i] = initial[i % n] + (2 * (Number(z >> 11n) * 2 ** -53) - 1);
  }
  const [, key] = splitmix64(state);
  return { position, rng: BigUint64Array.from([key, 0n]) };
}
