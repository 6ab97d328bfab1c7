// The page of bench/browser.mjs: `?build=NAME&mode=first|all`. `first` records the time
// from navigation start to the first decoded frame (module fetched, wasm compiled and
// instantiated, one frame decoded); `all` also runs every throughput figure
// (browser-workload.mjs). The result is `window.__done`.
import { FRAME, REDUCER_CONFIG, measure } from './browser-workload.mjs';

const params = new URLSearchParams(location.search);
const build = params.get('build');
const now = () => performance.now();

/** The API of one build, the same calls for each. */
async function load(name) {
  if (name === 'json') {
    // No module: JSON.parse only (the page's own cost to the first frame).
    return { decodeEager: (f) => JSON.parse(f) };
  }
  if (name === 'bindgen') {
    const wb = await import('/builds/bindgen/stapel_bench_bindgen.js');
    await wb.default();
    return {
      decodeEager(f) {
        const attempt = wb.decode_fast(f);
        if (attempt < 0) return JSON.parse(wb.decode_full(f, true));
        const m = JSON.parse(f);
        m.attempt = attempt;
        return m;
      },
      reducer() {
        const r = new wb.Reducer(JSON.stringify(REDUCER_CONFIG));
        return {
          applyLine: (l) => JSON.parse(r.apply_line(l)),
          applyLines: (t) => r.apply_lines(t),
          snapshotSize: () => r.snapshot().length,
        };
      },
    };
  }
  // The napi-rs WASI builds: the package's own API.
  const srp = await import(`/builds/${name}/stapel-runner-protocol.js`);
  return {
    decodeEager: (f) => srp.decode(f, { validate: true, lazy: false }),
    decodeLazy: (f) => srp.decode(f, { validate: true }),
    reducer() {
      const r = new srp.SessionReducer(REDUCER_CONFIG);
      return {
        applyLine: (l) => r.applyLine(l),
        applyLines: (t) => r.applyLines(t),
        snapshotSize: () => JSON.stringify(r.snapshot()).length,
      };
    },
  };
}

async function main() {
  const api = await load(build);
  const first = api.decodeEager(FRAME);
  const firstFrameMs = now();
  if (first.seq !== 17) throw new Error('the first frame decoded wrong');
  const out = { build, firstFrameMs, crossOriginIsolated: globalThis.crossOriginIsolated === true };
  if (params.get('mode') === 'all' && build !== 'json') Object.assign(out, measure(now, api));
  return out;
}

window.__done = main();
