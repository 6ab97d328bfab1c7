// Test-only modules the pages need, built on the fly with the package's esbuild.
import { PKG } from './harness.mjs';

/** An ES module exporting the `buffer` package's Buffer (the Node suite's test bytes). */
export async function bufferShim() {
  const esbuild = await import('esbuild');
  const out = await esbuild.build({
    stdin: { contents: "export { Buffer } from 'buffer';", resolveDir: PKG, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'warning',
  });
  return out.outputFiles[0].text;
}
