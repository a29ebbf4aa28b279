// Results as JSON. Kernel results hold `bigint` (every u64) and
// `Uint8Array` (results, payloads), which `JSON.stringify` refuses or
// mangles. `toJSON` converts them: bigint -> number (exact: every number the
// kernel hands out is below 2^53, SPEC 8), bytes -> standard base64 (as the
// stored format writes them), `undefined` fields dropped.

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A JSON-ready copy of a kernel result (or of any plain value holding them). */
export function toJSON(value) {
  if (typeof value === 'bigint') {
    if (value > MAX_SAFE || value < -MAX_SAFE) {
      throw new RangeError(`${value} cannot be represented exactly as a JSON number`);
    }
    return Number(value);
  }
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
  if (Array.isArray(value)) return value.map((x) => (x === undefined ? null : toJSON(x)));
  if (value !== null && typeof value === 'object') {
    if (typeof value.toJSON === 'function') return toJSON(value.toJSON());
    const out = {};
    for (const [k, x] of Object.entries(value)) if (x !== undefined) out[k] = toJSON(x);
    return out;
  }
  return value;
}

/** `JSON.stringify(toJSON(value), null, space)`. */
export function stringify(value, space) {
  return JSON.stringify(toJSON(value), null, space);
}
