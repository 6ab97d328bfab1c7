/* `node:path` in the browser build: `join` for the bundled schema lookup (node-fs.ts). */
export function join(...parts: string[]): string {
  return parts.join('/');
}
