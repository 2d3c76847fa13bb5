// Regenerates v8-log-vectors.txt: node sim/testdata/v8-log-vectors.js > sim/testdata/v8-log-vectors.txt
// Vectors: x and V8's Math.log(x), as float64 bit patterns in hex.
function rng(seed) { return () => { seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
const r = rng(1234), buf = new DataView(new ArrayBuffer(8));
const hex = (x) => { buf.setFloat64(0, x); return buf.getBigUint64(0).toString(16).padStart(16, "0"); };
const xs = [];
for (let i = 0; i < 20000; i++) xs.push(1 - r());                       // the sims' inputs
for (let i = 0; i < 10000; i++) xs.push(Math.exp((r() - 0.5) * 1400));  // wide range
for (let i = 0; i < 2000; i++) xs.push(1 + (r() - 0.5) * 2e-6);          // near 1
xs.push(5e-324, 2.2250738585072014e-308, 1, 2, 0.5, 1e308);
console.log("# x log(x) from node " + process.version);
for (const x of xs) console.log(hex(x) + " " + hex(Math.log(x)));
